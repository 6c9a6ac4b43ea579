"""What the model is offered each step: the servers' tools, the agent's own, and `terminate`.

The list is rebuilt only when one of its sources changes (the servers' tools, the agent's
own tools, what tool search offers, a schema the endpoint refused), and its token estimate
with it: a step that changes nothing costs a few identity checks. Tool search (agent.tools
.search) narrows a big list to what the model found; a schema an endpoint refused is sent
simplified for the rest of the session (agent.tools.simplify).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from agent.common.errors import ModelError
from agent.loop.plan import UPDATE_PLAN
from agent.tools.agent_tool import AgentTool
from agent.tools.results import Observation
from agent.tools.search import FIND_TOOLS, ToolSearch
from agent.tools.simplify import refused_tool, with_simplified
from agent.tools.stored import READ_RESULT, READ_RESULT_SCHEMA, ResultStore
from agent.tools.toolspec import ToolSpec

TERMINATE = "terminate"
TERMINATE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TERMINATE,
        "description": "Finish the task. Call this when the request is fully handled; "
        "put the final answer for the user in `answer`.",
        "parameters": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["success", "failure"]},
                "answer": {"type": "string", "description": "The final answer for the user."},
            },
            "required": ["status"],
        },
    },
}
# Names only the agent may use: servers' tools are renamed around them (read_resource is
# offered by agent.tools.catalog when servers publish resources, load_skill by
# agent.extensions.skills, update_plan by agent.loop.plan, task by agent.loop.subagents).
AGENT_TOOL_NAMES = frozenset(
    {TERMINATE, "read_resource", FIND_TOOLS, "load_skill", READ_RESULT, UPDATE_PLAN, "task"}
)
UNKNOWN_CANDIDATES = 12  # tool names an unknown-tool error offers instead


class ToolBox(Protocol):
    """What the loop needs from the registry."""

    tools: dict[str, ToolSpec]

    def openai_tools(self) -> list[dict[str, Any]]: ...

    async def settle(self) -> None:
        """Finish re-listings that servers announced, before the tool list is read."""

    async def call(
        self,
        public_name: str,
        arguments: dict[str, Any],
        *,
        progress: Any = None,
        spec: ToolSpec | None = None,
        meta: dict[str, Any] | None = None,
        on_task: Any = None,
    ) -> Observation: ...


class ToolOffer:
    """The tool list of each request, and which names the model may call."""

    def __init__(
        self,
        tools: ToolBox,
        *,
        agent_tools: Callable[[], Mapping[str, AgentTool]] | None = None,
        search: ToolSearch | None = None,
        results: ResultStore | None = None,
        hidden: Callable[[ToolSpec, str], bool] | None = None,
    ) -> None:
        self.tools = tools
        # Tools never offered to the model (--disallowed-tools): the gate refuses them too.
        self.hidden = hidden
        self._visible: tuple[object, list[dict[str, Any]], dict[str, ToolSpec]] | None = None
        # The agent's own tools besides terminate, asked for each step: they come and go
        # with what servers publish (read_resource once any server has resources).
        self._catalog_tools: Callable[[], Mapping[str, AgentTool]] = agent_tools or dict
        self.search = search  # too many tools for every request: the model searches them
        self.results = results  # big results kept whole, paged with read_result (None: cut)
        self._simplified: set[str] = set()  # tools whose schema the endpoint refused
        self._own_cache: tuple[tuple[object, ...], Mapping[str, AgentTool]] | None = None
        self._tools_source: tuple[object, ...] | None = None
        self._tools_cache: list[dict[str, Any]] = []
        self._tools_tokens = 0

    @property
    def searching(self) -> bool:
        return self.search is not None and self.search.engaged

    def offer(self, names: Iterable[str]) -> None:
        """Tools the model used (or a resumed session used) stay offered for the session."""
        if self.search is not None:
            self.search.offer(names)

    def offers(self, name: str) -> bool:
        """Whether a server's tool `name` may be offered to the model (not disallowed)."""
        spec = self.tools.tools.get(name)
        return spec is not None and not (self.hidden is not None and self.hidden(spec, name))

    def visible(self) -> tuple[list[dict[str, Any]], dict[str, ToolSpec]]:
        """The servers' declarations and tools the model may see: all of them unless some
        are hidden; filtered once per change of the registry's list."""
        servers = self.tools.openai_tools()
        if self.hidden is None:
            return servers, self.tools.tools
        cached = self._visible
        if cached is None or cached[0] is not servers:
            shown = {n: s for n, s in self.tools.tools.items() if self.offers(n)}
            listed = [t for t in servers if t["function"]["name"] in shown]
            cached = self._visible = (servers, listed, shown)
        return cached[1], cached[2]

    def knows(self, name: str) -> bool:
        """Whether a call to `name` can run: a server's tool, `terminate`, or one of ours."""
        return name in self.tools.tools or name == TERMINATE or name in self.own_tools()

    def unknown(self, name: str) -> str:
        """What the model is told when it calls a tool nobody offers."""
        problem = f"unknown tool '{name}'. Use one of the tools you were given."
        prefix, sep, _ = name.partition("__")
        same_server = sorted(n for n in self.tools.tools if sep and n.startswith(prefix + sep))
        near = same_server or difflib.get_close_matches(name, list(self.tools.tools), n=5)
        near = [n for n in near if self.offers(n)][:UNKNOWN_CANDIDATES]
        if near:
            problem += f" Closest: {', '.join(near)}."
        if self.searching:
            problem += f" `{FIND_TOOLS}` finds the others."
        return problem

    def own_tools(self) -> Mapping[str, AgentTool]:
        """The agent's own tools besides terminate: the catalog's, and find_tools while tool
        search is engaged. The same object until one of those changes (the loop caches)."""
        base = self._catalog_tools()
        searching = self.searching
        reading = self.results is not None and len(self.results) > 0  # once one was kept
        if not searching and not reading:
            return base
        key = (base, self.tools.tools, searching, reading)  # find_tools names the servers
        cached = self._own_cache
        if cached is None or any(a is not b for a, b in zip(cached[0], key, strict=True)):
            extra: dict[str, AgentTool] = {}
            if self.search is not None and searching:
                schema = self.search.tool_schema(self.visible()[1])
                extra[FIND_TOOLS] = AgentTool(schema, self._find_tools)
            if reading:
                extra[READ_RESULT] = AgentTool(READ_RESULT_SCHEMA, self._read_result)
            cached = self._own_cache = (key, {**base, **extra})
        return cached[1]

    async def _read_result(self, arguments: dict[str, Any]) -> Observation:
        assert self.results is not None
        return await self.results.read(arguments)

    async def _find_tools(self, arguments: dict[str, Any]) -> Observation:
        assert self.search is not None
        return self.search.find(self.visible()[1], arguments)

    def tool_list(self) -> tuple[list[dict[str, Any]], int]:
        """The model's tool list and its token estimate, rebuilt only when the servers' or
        the agent's tools change, or tool search offers more of them."""
        servers = self.visible()[0]
        engaged = self.search is not None and self.search.engage(servers)
        own = self.own_tools()
        version = self.search.version if self.search is not None else 0
        state = (version, engaged, len(self._simplified))
        cached = self._tools_source
        if cached is None or cached[0] is not servers or cached[1] is not own or cached[2] != state:
            self._tools_source = (servers, own, state)
            offered = self.search.select(servers) if self.search and engaged else servers
            mine = [tool.schema for tool in own.values()]
            self._tools_cache = [
                with_simplified(t) if t["function"]["name"] in self._simplified else t
                for t in [*offered, *mine, TERMINATE_TOOL]
            ]
            self._tools_tokens = len(json.dumps(self._tools_cache)) // 4
        return self._tools_cache, self._tools_tokens

    def simplify_refused(self, exc: ModelError, tools: list[dict[str, Any]]) -> str | None:
        """The tool whose schema a 400 names, if it was sent and not simplified yet: it is
        sent simplified from now on (for the rest of the session)."""
        if exc.status != 400:
            return None
        names = [t["function"]["name"] for t in tools]
        name = refused_tool(exc.message, names)
        if name is None or name in self._simplified:
            return None
        self._simplified.add(name)
        return name
