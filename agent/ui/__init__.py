"""What a person sees and answers: the REPL (input line, slash commands, questions,
forms), rich rendering of the loop's events, a single-shot run's stdout, and SafeConsole,
the one terminal writer that shows control characters instead of running them.

May import: apps, loop, extensions, tools, auth, model, config, common. Never session or cli.
"""
