"""The floor: the smallest honest MCP + OpenAI loop, for start-up and exit baselines.

`python bench/floor_loop.py PROMPT -- COMMAND ARGS...`: import the SDK and the OpenAI client,
start one stdio server, list its tools, then loop (model -> tool calls -> model) until the
model answers; print the answer and leave the SDK's context managers as they are written.
No retries, no approval, no rendering: what any agent must at least do. The model comes
from OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client
from openai import AsyncOpenAI


async def main(prompt: str, command: list[str]) -> None:
    model = AsyncOpenAI(max_retries=0)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(stdio_client(params), mode="legacy") as client:
        listed = await client.list_tools()
        tools: list[Any] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in listed.tools
        ]
        # plain dicts, as a hand-written loop sends them (the client's TypedDicts are not needed)
        messages: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            reply = await model.chat.completions.create(
                model=os.environ.get("OPENAI_MODEL", "floor"), messages=messages, tools=tools
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                print(message.content, flush=True)
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                assert call.type == "function"  # the scripted model sends no custom tools
                result = await client.call_tool(
                    call.function.name, json.loads(call.function.arguments or "{}")
                )
                text = "\n".join(getattr(block, "text", "") for block in result.content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    await model.close()


if __name__ == "__main__":
    split = sys.argv.index("--")
    anyio.run(main, " ".join(sys.argv[1:split]), sys.argv[split + 1 :])
