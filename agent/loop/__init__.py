"""The ReAct loop and what each step calls: the think/act/observe generator, the one gate
every tool call passes (hooks, approval, run, record), the offered tools, calls parsed from
replies or written as text, the context budget and compaction, and the typed events that
are the only seam to front ends.

May import: extensions, tools, auth, model, config, common. Never ui, session or cli.
"""
