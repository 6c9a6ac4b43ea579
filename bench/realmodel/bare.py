"""The bare loop of the real-model benchmark: what a hand-written MCP client does.

`python -m bench.realmodel.bare PROMPT_FILE SERVERS_JSON MAX_STEPS`: connect the servers (a
JSON list of {name, command, args, env}), offer every tool (a second tool of the same name
gets its server's name in front), then ask the model, run its calls, feed back the results'
text, until it answers or MAX_STEPS requests were made. No system prompt, no retries, no
reading of calls written as text, temperature 0. Prints one JSON line: {answer, requests, status}.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
import openai
from mcp import Client, StdioServerParameters, stdio_client


async def main(prompt: str, servers: list[dict[str, Any]], max_steps: int) -> dict[str, Any]:
    model = openai.AsyncOpenAI(max_retries=0, timeout=3600)
    routes: dict[str, tuple[Client, str]] = {}
    tools: list[Any] = []
    async with AsyncExitStack() as stack:
        for server in servers:
            env = {**os.environ, **server.get("env", {})}
            params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
            errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: ASYNC230, SIM115
            client = await stack.enter_async_context(
                Client(stdio_client(params, errlog=errlog), mode="legacy")
            )
            for tool in (await client.list_tools()).tools:
                name = tool.name if tool.name not in routes else f"{server['name']}_{tool.name}"
                routes[name] = (client, tool.name)
                function = {"name": name, "description": tool.description or ""}
                tools.append(
                    {"type": "function", "function": {**function, "parameters": tool.input_schema}}
                )
        messages: list[Any] = [{"role": "user", "content": prompt}]
        for step in range(1, max_steps + 1):
            try:
                reply = await model.chat.completions.create(
                    model=os.environ.get("OPENAI_MODEL", "qwen"),
                    messages=messages,
                    tools=tools,
                    temperature=0,
                )
            except openai.APIError as exc:
                return {"answer": "", "requests": step, "status": f"error: {exc}"}
            message = reply.choices[0].message
            if not message.tool_calls:
                return {"answer": message.content or "", "requests": step, "status": "answered"}
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                if call.type != "function":  # a custom tool: none is offered
                    continue
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                    client, name = routes[call.function.name]
                    result = await client.call_tool(name, arguments)
                    text = "\n".join(getattr(block, "text", "") for block in result.content)
                except Exception as exc:  # what a bare loop does: the error is the result
                    text = f"Error: {exc}"
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return {"answer": "", "requests": max_steps, "status": "max_steps"}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        prompt = fh.read()
    servers = json.loads(sys.argv[2])
    outcome = anyio.run(main, prompt, servers, int(sys.argv[3]))
    print(json.dumps(outcome), flush=True)
