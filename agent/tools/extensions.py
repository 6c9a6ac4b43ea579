"""The MCP extensions this agent implements: declared to every server, and nothing else.

Extensions (SEP-2133) are opt-in on both sides: a client lists the ones it supports in its
capabilities (on 2026-07-28 in every request's `_meta`), and a server may then use them —
return a task handle instead of a result, offer skills, and so on. Declaring one the
agent does not handle would invite answers it cannot read, so this list holds exactly the
extensions that are implemented and tested; add yours here when yours is.

Each entry is an `mcp.client.extension.ClientExtension`: `advertise(identifier, settings)`
for one that only needs declaring, or a subclass when it claims a result shape (tasks).
"""

from __future__ import annotations

from mcp.client.extension import ClientExtension, advertise

SKILLS = "io.modelcontextprotocol/skills"  # agent.skills: skills/list, skills/get, digests


def declared_extensions() -> list[ClientExtension]:
    """A fresh list for each connection (the SDK folds it into that client)."""
    return [advertise(SKILLS)]


def declared_names() -> list[str]:
    """The identifiers declared, sorted (for /servers, tests and docs)."""
    return sorted(extension.identifier for extension in declared_extensions())
