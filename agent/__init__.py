"""A terminal ReAct agent that thinks with an OpenAI-compatible model and acts through MCP."""

__version__ = "0.1.0"
