"""The MCP extensions this agent implements: declared to every server, and nothing else.

Extensions (SEP-2133) are opt-in on both sides: a client lists the ones it supports in its
capabilities (on 2026-07-28 in every request's `_meta`), and a server may then use them —
return a task handle instead of a result, offer skills, and so on. Declaring one the
agent does not handle would invite answers it cannot read, so this list holds exactly the
extensions that are implemented and tested; add yours here when yours is.

Each entry is an `mcp.client.extension.ClientExtension`: `advertise(identifier, settings)`
for one that only needs declaring, or a subclass when it claims a result shape (tasks).

MCP Apps (`io.modelcontextprotocol/ui`) is declared only where a page can be shown (the
REPL's app host, agent.apps): a server may attach pages to its tools when it sees it, and a
`-p` run or a script could show none.
"""

from __future__ import annotations

from mcp.client.extension import ClientExtension, advertise

from agent.tools.tasks import TasksExtension
from agent.tools.uimeta import APP_MIME, EXTENSION

SKILLS = (
    "io.modelcontextprotocol/skills"  # agent.extensions.skills: skills/list, skills/get, digests
)
UI = EXTENSION  # agent.apps: the app host (REPL only)


def declared_extensions(*, apps: bool = False) -> list[ClientExtension]:
    """A fresh list for each connection (the SDK folds it into that client); `apps`: this
    run hosts MCP Apps' pages."""
    found = [advertise(SKILLS), TasksExtension()]
    if apps:
        found.append(advertise(UI, {"mimeTypes": [APP_MIME]}))
    return found


def declared_names(*, apps: bool = False) -> list[str]:
    """The identifiers declared, sorted (for /servers, tests and docs)."""
    return sorted(extension.identifier for extension in declared_extensions(apps=apps))
