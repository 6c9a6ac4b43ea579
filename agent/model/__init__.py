"""The model client: the `ChatModel` protocol and its OpenAI-compatible implementation,
the openai client's errors mapped to what the user must fix, prices, sampling's tool
shapes, and the local model server found with no configuration.

May import: config, common. Never tools or anything above.
"""
