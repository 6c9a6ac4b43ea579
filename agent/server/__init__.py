"""The bundled MCP server (`python -m agent.server`): the tools a coding/ops agent needs.

It is the default server, so `python run_mcp.py` works with nothing else installed.

May import: common only (it is a program of its own; the agent starts it as a subprocess).
"""
