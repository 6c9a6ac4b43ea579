"""Logging in to remote MCP servers: OAuth 2.1 through the SDK's client, with what a
terminal agent adds around it (a token store on disk, a loopback callback, the browser,
the headless rule, errors that name the step that failed).

May import: config, common.
"""
