"""Sampling with tools: a server's `sampling/createMessage` may carry its own tools and a
tool choice; our model answers with tool calls, which go back as `tool_use` content (the
server runs the tools and asks again with `tool_result` blocks).

We declare `sampling.tools`. The server's tool names are sanitized for the chat API and
mapped back exactly; its tool_use / tool_result history becomes assistant tool calls and
tool messages.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp.types as types

from agent.common import json_limits
from agent.model.model_types import Reply

CAPABILITY = types.SamplingCapability(tools=types.SamplingToolsCapability())
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def chat_tools(tools: list[types.Tool] | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The server's tools as chat-completions functions, and public name -> its own name."""
    declared: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for tool in tools or []:
        public = _INVALID.sub("_", tool.name)[:64] or "tool"
        while public in names:  # two names that sanitize alike stay apart
            public = f"{public[:60]}_{len(names)}"
        names[public] = tool.name
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        declared.append(
            {
                "type": "function",
                "function": {
                    "name": public,
                    "description": tool.description or "",
                    "parameters": schema or {"type": "object", "properties": {}},
                },
            }
        )
    return declared, names


def chat_tool_choice(choice: types.ToolChoice | None) -> str | None:
    """MCP's tool choice as the chat API's (`auto`, `required`, `none`)."""
    return choice.mode if choice is not None and choice.mode else None


def chat_messages(message: types.SamplingMessage, names: dict[str, str]) -> list[dict[str, Any]]:
    """One sampling message as chat messages: tool_use blocks become the assistant's tool
    calls, tool_result blocks tool messages (before the rest of that user turn)."""
    blocks = message.content_as_list
    public = {own: name for name, own in names.items()}
    uses = [b for b in blocks if isinstance(b, types.ToolUseContent)]
    results = [b for b in blocks if isinstance(b, types.ToolResultContent)]
    rest = [b for b in blocks if not isinstance(b, types.ToolUseContent | types.ToolResultContent)]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.tool_use_id, "content": _result_text(r)} for r in results
    ]
    text = "\n".join(b.text for b in rest if isinstance(b, types.TextContent))
    if uses:
        calls = [
            {
                "id": use.id,
                "type": "function",
                "function": {
                    "name": public.get(use.name, use.name),
                    "arguments": json.dumps(use.input, ensure_ascii=False),
                },
            }
            for use in uses
        ]
        out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
    elif rest or not results:
        out.append(_plain(message.role, rest))
    return out


def _plain(role: str, blocks: list[Any]) -> dict[str, Any]:
    """Text, images (user turns only) and placeholders for the rest."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, types.ImageContent) and role == "user":
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": f"[{block.type} content omitted]"})
    if all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "\n".join(p["text"] for p in parts)}
    return {"role": role, "content": parts}


def _result_text(result: types.ToolResultContent) -> str:
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    if result.structured_content is not None and not texts:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    body = "\n".join(texts) or "(no output)"
    return f"Error: {body}" if result.is_error else body


def result_with_tools(reply: Reply, names: dict[str, str], model: str) -> Any:
    """The reply as the server asked for it: text and tool_use blocks, stop reason toolUse
    when the model called tools."""
    content: list[Any] = [types.TextContent(text=reply.content)] if reply.content else []
    for call in reply.tool_calls:
        try:
            arguments = json_limits.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {"_unparsed": call.arguments}
        if not isinstance(arguments, dict):
            arguments = {"value": arguments}
        name = names.get(call.name, call.name)
        content.append(types.ToolUseContent(name=name, id=call.id, input=arguments))
    if reply.tool_calls:
        stop = "toolUse"
    else:
        stop = "maxTokens" if reply.finish_reason == "length" else "endTurn"
    return types.CreateMessageResultWithTools(
        role="assistant",
        content=content or [types.TextContent(text="")],
        model=model,
        stop_reason=stop,
    )
