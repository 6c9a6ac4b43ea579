"""What every package shares and that imports nothing of ours above it: the exception
hierarchy, the redactor, messages (memory), images, text helpers, private files, signals,
malloc tuning, the transcript, and the one module that reaches private names of the mcp SDK.

May import: nothing outside common.
"""
