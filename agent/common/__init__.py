"""What every package shares and that imports nothing of ours above it: the exception
hierarchy, the redactor, messages (memory), images, text helpers, private files, signals,
malloc tuning, the transcript, the sandbox's bubblewrap command line (the bundled server
uses it too), and the one module that reaches private names of the mcp SDK.

May import: nothing outside common.
"""
