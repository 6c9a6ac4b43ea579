"""The bundled MCP server (`python -m agent.server`): the tools a coding/ops agent needs.

It is the default server, so `python run_mcp.py` works with nothing else installed.
"""
