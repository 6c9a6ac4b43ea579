"""Tool servers: one `ToolServer` contract (connect, list, call, close) with MCP (stdio,
SSE, streamable HTTP) and OpenAPI implementations, the registry of all of them, results as
observations, tool search, kept results, what servers offer besides tools (resources and
prompts: the catalog) and what they ask of us (sampling, elicitation, roots).

May import: auth, model, config, common. Never the loop or anything above it.
"""
