"""The modules' imports run one way: cli -> session -> ui / catalog -> react -> tools ->
config / llm -> redact / memory. A front end receives what the session built; nothing below
imports what is above it (a second front end can be added without touching the first)."""

from __future__ import annotations

import ast
from pathlib import Path

import agent

ROOT = Path(agent.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every agent module -> the agent modules it imports anywhere (also inside functions
    and under TYPE_CHECKING: a cycle there still ties the two modules together)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t not in ("agent", name)}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    assert graph["agent.session"] >= {"agent.config", "agent.react"}  # the graph is real
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_lower_layers_never_import_upper_ones() -> None:
    graph = import_graph()
    for name, deps in graph.items():
        if name != "agent.cli":
            assert "agent.cli" not in deps, name
        if name not in ("agent.cli", "agent.session"):
            assert "agent.session" not in deps, f"{name} imports the session; pass it down"
    assert not {d for d in graph["agent.redact"] if d != "agent.errors"}, graph["agent.redact"]
    assert not any(d.startswith("agent.ui") for d in graph["agent.ui.input"])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
