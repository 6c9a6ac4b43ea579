"""The modules' imports run one way: cli -> front_ends -> startup -> ui / catalog -> react ->
tools -> config / llm -> redact / memory. A front end receives what start-up built; nothing
below imports what is above it (a second front end can be added without touching the first)."""

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
        targets = imports_in(ast.parse(path.read_text(encoding="utf-8")))
        graph[name] |= {t for t in targets if t in modules and t not in ("agent", name)}
    return graph


def imports_in(tree: ast.AST) -> set[str]:
    """Every name an import statement anywhere in `tree` could bring in (`from a import b`:
    both `a` and `a.b`, since b may be a module)."""
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
    return targets


# Top to bottom; a module may import its own layer and those below it, never one above,
# at module level or inside a function (a lazy import still ties the layers together).
# A module's layer is its longest listed prefix, so a new module must be placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    # entry points: the command line and the bundled server (a program of its own)
    ("agent.cli", "agent.server"),
    # the Python API: a front end like the CLI's, whose keywords are the CLI's options,
    # resolved by the session below it (agent.session.run_settings), never through the CLI
    ("agent.api",),
    # one session, opened the same way for every front end
    ("agent.session",),
    # what people see and answer: the REPL, a single-shot run's output, the app pages' host
    ("agent.ui", "agent.apps.host"),
    # the loop and what each step calls
    ("agent.loop",),
    # hooks, skills, telemetry
    ("agent.extensions",),
    # tool servers, what they offer besides tools and ask of us; the app pages' protocol
    ("agent.tools", "agent.apps"),
    # logins to servers; the model client
    ("agent.auth", "agent.model"),
    # settings, the files they come from, trust
    ("agent.config",),
    # what everything shares
    ("agent.common",),
)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of `module`'s longest listed prefix (None: not placed)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.")) and (
                best is None or len(name) > best[0]
            ):
                best = (len(name), index)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """`importer -> imported` for every import of a layer above the importer's."""
    found = []
    for name, deps in sorted(graph.items()):
        here = layer_of(name)
        for dep in sorted(deps):
            there = layer_of(dep)
            if here is not None and there is not None and there < here:
                found.append(f"{name} -> {dep}")
    return found


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
    assert graph["agent.session.startup"] >= {
        "agent.config.settings",
        "agent.loop.react",
    }  # the graph is real
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_lower_layers_never_import_upper_ones() -> None:
    graph = import_graph()
    # The front ends open sessions: the CLI's (agent.cli.*) and the Python API.
    front_ends = ("agent.cli.", "agent.api")
    for name, deps in graph.items():
        if name != "agent.cli.main":
            assert "agent.cli.main" not in deps, name
        if not name.startswith(front_ends) and name != "agent.session.startup":
            assert "agent.session.startup" not in deps, f"{name} imports start-up; pass it down"
        if name != "agent.cli.main":
            assert "agent.cli.front_ends" not in deps, f"{name} imports the front ends"
    assert not {d for d in graph["agent.common.redact"] if d != "agent.common.errors"}, graph[
        "agent.common.redact"
    ]
    assert not any(d.startswith("agent.ui") for d in graph["agent.ui.input"])


def test_the_slash_commands_are_given_what_they_read_not_the_repl() -> None:
    """The commands reach the REPL only through the callables its constructor hands them
    (`question`, `run_turn`); only the front ends' builder imports the REPL."""
    graph = import_graph()
    assert "agent.ui.commands" in graph["agent.ui.repl"]
    importers = sorted(name for name, deps in graph.items() if "agent.ui.repl" in deps)
    assert importers == ["agent.cli.front_ends"], importers


def test_every_module_has_a_layer() -> None:
    graph = import_graph()
    unplaced = [name for name in graph if name != "agent" and layer_of(name) is None]
    assert unplaced == [], f"add {unplaced} to LAYERS at the top of this file"


def test_no_module_imports_a_layer_above_its_own() -> None:
    graph = import_graph()
    assert (
        "agent.config.login_files" in graph["agent.config.settings"]
    )  # the graph sees function bodies too
    assert upward_imports(graph) == []
    # config reads the stored logins' secrets itself, not through the auth layer above it
    assert "agent.auth.store" not in graph["agent.config.settings"]
    # the Python API's settings come from the session layer, not from the command line
    assert "agent.session.run_settings" in graph["agent.api"]
    assert not any(dep.startswith("agent.cli") for dep in graph["agent.api"]), graph["agent.api"]


def test_the_layer_check_finds_an_import_from_above() -> None:
    graph = {
        "agent.config.settings": {"agent.auth.store", "agent.common.errors"},
        "agent.auth.store": set(),
    }
    assert upward_imports(graph) == ["agent.config.settings -> agent.auth.store"]
    # the Python API resolves its settings through the session, not the command line
    planted = {"agent.api": {"agent.cli.main", "agent.session.run_settings"}}
    assert upward_imports(planted) == ["agent.api -> agent.cli.main"]
    late = "def f():\n    from agent.auth.store import token_file\n"
    assert imports_in(ast.parse(late)) == {"agent.auth.store", "agent.auth.store.token_file"}


def test_only_the_registry_knows_the_mcp_connection_class() -> None:
    """Front ends and the features above the registry see a server as a ToolServer: what
    a server can do is asked through that contract, never by importing the MCP connection
    (`ui.repl` -> `tools.mcp` was such an upward import)."""
    graph = import_graph()
    for name in (
        "agent.ui.repl",
        "agent.tools.catalog",
        "agent.extensions.skills",
        "agent.apps.host",
        "agent.cli.login_command",
    ):
        assert name in graph, name
    for name, deps in graph.items():
        above = name.startswith(("agent.ui", "agent.apps")) or name in (
            "agent.tools.catalog",
            "agent.extensions.skills",
            "agent.cli.login_command",
        )
        if above:
            assert "agent.tools.mcp" not in deps, f"{name} imports agent.tools.mcp"


# What a server is told by its owner or keeps about itself: given to its constructor
# (agent.tools.base.ServerHooks, max_tools) or changed by its own methods, never assigned
# from outside (the registry used to set the first five onto each server it built).
SERVER_OWN = frozenset(
    {"hooks", "max_tools", "on_reconnected", "on_slow_start", "on_log"}
    | {"listing_cut", "list_warnings", "waiting_on_person", "token_store"}
)


def outside_writes(tree: ast.AST, names: frozenset[str]) -> list[str]:
    """`x.name = ...` (also `+=`) for one of `names` on anything but `self`."""
    return [
        f"{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and node.attr in names
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]


def test_nothing_outside_a_server_assigns_its_hooks_or_limits() -> None:
    writes = {
        _module_name(path): found
        for path in ROOT.rglob("*.py")
        if (found := outside_writes(ast.parse(path.read_text(encoding="utf-8")), SERVER_OWN))
    }
    assert writes == {}


def test_the_outside_write_finder_finds_one() -> None:
    code = "server.on_log = f\nself.max_tools = 3\nregistry.servers['a'].hooks = h\n"
    assert outside_writes(ast.parse(code), SERVER_OWN) == [
        "1: server.on_log",
        "3: registry.servers['a'].hooks",
    ]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# -- one seam to the mcp SDK

SDK_SEAM = "agent.common.sdk_private"  # the one module that may reach private SDK names
SDK_PACKAGES = ("mcp", "mcp_types")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_private_names(files: list[Path]) -> set[str]:
    """Private names these files define: functions, classes, module values, `self._x`."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if _private(n)}


def _sdk_files() -> list[Path]:
    """The SDK's client side (what a client can reach; its server side and the types
    package are reached only through imports, which are checked by module)."""
    import mcp

    root = Path(mcp.__file__).parent
    return [p for part in ("client", "shared", "os") for p in (root / part).rglob("*.py")]


def _sdk_module(name: str | None) -> bool:
    return bool(name) and str(name).split(".")[0] in SDK_PACKAGES


def private_sdk_reaches(tree: ast.AST, sdk_names: set[str]) -> list[str]:
    """Where `tree` reaches a private SDK name: a private module or name imported from the
    SDK, any `_x` of an SDK module, `x._name` (or getattr) for a private name only the SDK
    defines, and any assignment to an SDK module's attribute (a patch)."""
    found: list[str] = []
    modules: set[str] = set()  # local names bound to SDK modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _sdk_module(alias.name):
                    modules.add(alias.asname or alias.name.split(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and _sdk_module(node.module):
            assert node.module is not None
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            on_module = isinstance(node.value, ast.Name) and node.value.id in modules
            if on_module and (_private(node.attr) or isinstance(node.ctx, ast.Store)):
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")  # type: ignore[attr-defined]
            elif node.attr in sdk_names:
                found.append(f"{node.lineno}: ._{node.attr.lstrip('_')}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in sdk_names
        ):
            found.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_only_the_seam_module_reaches_private_sdk_names() -> None:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    ours = [p for name, p in files.items() if name != SDK_SEAM]
    sdk_names = _defined_private_names(_sdk_files()) - _defined_private_names(ours)
    assert {"_dispatcher", "_stamp", "_auth_flow"} <= sdk_names  # the finder sees the SDK's
    reaches = {
        name: found
        for name, path in files.items()
        if name != SDK_SEAM
        and (found := private_sdk_reaches(ast.parse(path.read_text(encoding="utf-8")), sdk_names))
    }
    assert reaches == {}, f"private SDK names outside {SDK_SEAM}: {reaches}"


def test_no_class_of_ours_overrides_a_private_sdk_name_outside_the_seam() -> None:
    """A subclass of an SDK class may define a private name the SDK class has (an override
    of an SDK step, or a clash with its state) only in the seam module."""
    import importlib

    clashes: list[str] = []
    for path in ROOT.rglob("*.py"):
        name = _module_name(path)
        text = path.read_text(encoding="utf-8")
        if name == SDK_SEAM or ("from mcp" not in text and "import mcp" not in text):
            continue
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != name:
                continue
            sdk = [k for k in cls.__mro__ if _sdk_module(k.__module__)]
            ours = [k for k in cls.__mro__ if k.__module__.startswith("agent.")]
            ours = [k for k in ours if k.__module__ != SDK_SEAM]
            if not sdk:
                continue
            theirs = {n for k in sdk for n in vars(k) if _private(n) and n != "_abc_impl"}
            theirs |= {n for k in sdk for n in _state_names(k)}
            mine = {n for k in ours for n in vars(k) if _private(n)}
            mine |= {n for k in ours for n in _state_names(k)}
            clashes += [f"{name}.{cls.__name__}.{n}" for n in sorted(mine & theirs)]
    assert clashes == []


def _state_names(cls: type) -> set[str]:
    """`self._x` a class assigns in its own methods."""
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return set()
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and _private(node.attr)
    }


def test_the_seam_finder_finds_private_reaches() -> None:
    code = """
import mcp.client.stdio as stdio
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.client.session import _preconnect_stamp
stdio._parse_line = None
stdio.PROCESS_TERMINATION_TIMEOUT = 0.5
session._dispatcher.send_raw_request()
getattr(session, "_absorb_tool_listing", None)
self._ours = 1
"""
    found = private_sdk_reaches(ast.parse(code), {"_dispatcher", "_absorb_tool_listing"})
    assert sorted(line.split(":")[0] for line in found) == ["3", "4", "5", "6", "7", "8"]


# --------------------------------------------------------------------------- one gate

# Who may ask for a server's tool to run, and why each may. Everyone else goes through the
# gate (agent/loop/gate.py: hooks, approval, run, record): a page's call reaches AppHost.call_tool
# (the bridge's `services.call_tool`), which hands it to the gate.
TOOL_CALLERS = {
    "agent.loop.call_runner": "runs a call the gate decided (ToolBox.call)",
    "agent.tools.registry": "the registry's call, made only by the call runner",
    "agent.tools.mcp": "the connection's own request to the SDK",
    "agent.apps.bridge": "a page's tools/call, handed to AppHost.call_tool (the gate)",
}


def tool_calls_in(tree: ast.AST) -> list[str]:
    """Every `x.call(...)` / `x.call_tool(...)` in `tree`: a request to run a tool."""
    return [
        f"line {node.lineno}: .{node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("call", "call_tool")
    ]


def test_no_second_door_to_a_server_s_tools() -> None:
    doors = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        if name in TOOL_CALLERS:
            continue
        found = tool_calls_in(ast.parse(path.read_text(encoding="utf-8")))
        doors += [f"{name} {where}" for where in found]
    assert not doors, f"a tool call that skips agent/loop/gate.py: {doors}"


def test_the_door_finder_finds_a_direct_call() -> None:
    planted = "async def f(registry):\n    return await registry.call('x__y', {})\n"
    assert tool_calls_in(ast.parse(planted)) == ["line 2: .call()"]


# -- one terminal writer (issue 29): every byte for a terminal is cleaned and redacted -------

# The writer: SafeConsole (rich output) and terminal() (plain lines) clean every control and
# invisible character and mask secrets. No other module writes to stdout or stderr itself.
TERMINAL_WRITER = "agent.ui.safe"
# The few raw writes that remain, each counted (a new one fails the test) and why it may.
RAW_WRITES_ALLOWED: dict[str, tuple[int, str]] = {
    "agent.server.search": (2, "the bundled server's search worker: its stdout is a pipe"),
    "agent.server.__main__": (1, "the bundled server, a process of its own, not our terminal"),
    "agent.tools.result_search": (4, "read_result's worker process: its stdout is a pipe"),
    # Below agent.ui (they cannot import the writer): our own words and a path, no content.
    "agent.common.signals": (1, "the name of the signal that ends the process, said as it ends"),
    "agent.config.dialects": (1, "a `note:` line about how a file was read (config layer)"),
    "agent.config.servers": (1, "the world-readable secrets warning: a path and key names"),
    "agent.auth.login": (1, "LoginHost's default notify; front ends pass a SafeConsole's"),
    # Each of its lines goes through clean() already (workspace trust's own module).
    "agent.cli.trust_command": (3, "`run_mcp.py trust` lines, each through agent.ui.safe.clean"),
}


def raw_writes_in(tree: ast.AST) -> list[str]:
    """Every write to the terminal that is not the writer's: print(), sys.stdout/stderr
    .write(), typer/click.echo(), rich's print, or a plain rich Console built here."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, what = node.func, None
        if isinstance(func, ast.Name) and func.id in ("print", "Console", "rprint"):
            what = f"{func.id}()"
        elif isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value)
            if func.attr == "write" and owner in ("sys.stdout", "sys.stderr"):
                what = f"{owner}.write()"
            elif func.attr == "echo" and owner in ("typer", "click"):
                what = f"{owner}.echo()"
            elif (func.attr, owner) in (("Console", "console"), ("Console", "rich.console")):
                what = f"{owner}.Console()"
            elif (func.attr, owner) == ("print", "rich"):
                what = "rich.print()"
        if what is not None:
            found.append(f"line {node.lineno}: {what}")
    return found


def test_every_terminal_write_goes_through_the_one_writer() -> None:
    doors, counts = [], {}
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        if name == TERMINAL_WRITER:
            continue
        found = raw_writes_in(ast.parse(path.read_text(encoding="utf-8")))
        if name in RAW_WRITES_ALLOWED:
            counts[name] = len(found)
        else:
            doors += [f"{name} {where}" for where in found]
    assert not doors, f"use agent.ui.safe (SafeConsole or terminal()): {doors}"
    allowed = {name: count for name, (count, _) in RAW_WRITES_ALLOWED.items()}
    assert counts == allowed, "an allowed module's raw writes changed: move them to the writer"


def test_the_writer_finder_finds_every_kind_of_raw_write() -> None:
    planted = (
        "import sys, typer\nfrom rich.console import Console\n"
        "print('x')\nsys.stderr.write('x')\ntyper.echo('x')\nConsole().print('x')\n"
    )
    assert raw_writes_in(ast.parse(planted)) == [
        "line 3: print()",
        "line 4: sys.stderr.write()",
        "line 5: typer.echo()",
        "line 6: Console()",
    ]
    assert raw_writes_in(ast.parse("SafeConsole(stderr=True).print('x')\nconsole.print(1)")) == []


def test_every_package_says_what_it_holds_and_what_it_may_import() -> None:
    """A newcomer opens a package's __init__.py and learns its place: what it holds, and the
    packages it may import (the rule LAYERS enforces)."""
    silent = []
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "May import:" not in doc or len(doc.split("May import:")[0].strip()) < 40:
            silent.append(init.parent.name)
    assert silent == [], f"say what these hold and what they may import: {silent}"


def test_the_top_level_keeps_only_the_package_itself() -> None:
    """Modules live in packages named for what they hold; `agent/` itself holds none."""
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py"]
