"""The command line: `run_mcp.py`'s flags and subcommands (`mcp`, `trust`, `batch`,
`--login`), the front ends built on an open session (the single-shot run, stream-json,
the REPL, a batch), and the one place exceptions become exit codes.

May import: every package below it (session, ui, apps, loop, extensions, tools, auth,
model, config, common). Nothing imports it but `run_mcp.py`: the Python API (agent.api)
takes the same options from agent.session.run_settings.
"""
