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


if __name__ == "__main__":
    server.run("stdio")
