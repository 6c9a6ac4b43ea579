"""A stdio MCP server whose tool asks the client's model with tools (sampling with tools):
the model calls `get_weather`, the server runs it and asks again with the result."""

import json

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sampler")
WEATHER = types.Tool(
    name="get.weather",  # a name the chat API would refuse as is
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@server.tool()
async def plan_trip(city: str, ctx: Context) -> str:
    """Ask the client's model, with a tool it must use first."""
    history = [
        types.SamplingMessage(role="user", content=types.TextContent(text=f"Trip to {city}?"))
    ]
    first = await ctx.session.create_message(
        messages=history,
        max_tokens=100,
        tools=[WEATHER],
        tool_choice=types.ToolChoice(mode="required"),
    )
    uses = [b for b in first.content_as_list if isinstance(b, types.ToolUseContent)]
    if first.stop_reason != "toolUse" or not uses:
        return f"no tool use: {first.model_dump_json()}"
    use = uses[0]
    weather = f"sunny in {use.input.get('city')}"
    history += [
        types.SamplingMessage(role="assistant", content=list(first.content_as_list)),
        types.SamplingMessage(
            role="user",
            content=[
                types.ToolResultContent(
                    tool_use_id=use.id, content=[types.TextContent(text=weather)]
                )
            ],
        ),
    ]
    second = await ctx.session.create_message(messages=history, max_tokens=100, tools=[WEATHER])
    text = " ".join(b.text for b in second.content_as_list if isinstance(b, types.TextContent))
    return json.dumps({"tool": use.name, "input": use.input, "answer": text})


# 100 tools of 20 KB each: a 2 MB sampling request, if nobody counts the tools.
BULKY = [
    types.Tool(
        name=f"bulky_{i}",
        description=f"Tool {i}. " + "words " * 3400,
        input_schema={"type": "object", "properties": {}},
    )
    for i in range(100)
]


@server.tool()
async def plan_with_many_tools(city: str, ctx: Context) -> str:
    """Ask the client's model with a short prompt and a hundred bulky tools."""
    history = [
        types.SamplingMessage(role="user", content=types.TextContent(text=f"Trip to {city}?"))
    ]
    try:
        answer = await ctx.session.create_message(messages=history, max_tokens=50, tools=BULKY)
    except Exception as exc:  # the client's refusal, as the server sees it
        return f"refused: {exc}"
    return " ".join(b.text for b in answer.content_as_list if isinstance(b, types.TextContent))


if __name__ == "__main__":
    server.run("stdio")
