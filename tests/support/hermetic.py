"""Every test's own home: what keeps the developer's own setup out of the tests.

The agent reads the user's folders (`~/.config/mcp-agent`'s config.toml, mcp.json and
hooks.json, the state folder, other clients' files under HOME) and the user's own variables
(OPENAI_*, MCP_AGENT_*). A test that read them would pass on a clean machine and fail for
anyone who uses the agent. So tests/conftest.py gives every test a fresh HOME with the XDG
folders in it and drops those variables, in `os.environ` itself: code run in-process reads
it, and every helper that starts the agent (tests/support/cli.py, terminal.py, the bench,
conformance) builds the child's environment from it.

What a fresh HOME would lose is kept: the download caches npm, uv and pip find through
HOME stay the real ones (a test that installs a server must not download it afresh).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# Read once, at import (conftest imports this before any test runs): the home a test's own
# HOME replaces, for what must stay there (the caches, a folder outside the temp folders).
REAL_HOME = Path.home()

# The agent's settings from the environment: a developer's key, endpoint or config folder.
AGENT_PREFIXES = ("OPENAI_", "MCP_AGENT_")
# Variables of those prefixes that belong to the test set-up, not to the agent.
TEST_SETUP = frozenset({"MCP_AGENT_NPM_PREFIX", "MCP_AGENT_APPS_SCREENSHOT"})


def home_env(home: Path) -> dict[str, str]:
    """HOME and the four XDG folders, all inside `home` (as on a fresh account)."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
    }


def kept_caches(environ: Mapping[str, str]) -> dict[str, str]:
    """The download caches that HOME would otherwise move, pinned where they are now; a
    variable the environment already sets is left as it is."""
    cache = Path(environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache")
    wanted = {
        "npm_config_cache": REAL_HOME / ".npm",
        "UV_CACHE_DIR": cache / "uv",
        "PIP_CACHE_DIR": cache / "pip",
    }
    set_already = {name.lower() for name in environ}
    return {k: str(v) for k, v in wanted.items() if k.lower() not in set_already}


def agent_settings(environ: Mapping[str, str]) -> list[str]:
    """The names in `environ` that would set the agent up as the developer has it."""
    return [k for k in environ if k.startswith(AGENT_PREFIXES) and k not in TEST_SETUP]


def assert_own_home(env: Mapping[str, str]) -> None:
    """A helper about to start the agent checks its environment: never the real home (a
    test started from a fixture wider than one test, before the autouse one, would be)."""
    home = env.get("HOME")
    if home is None or Path(home) == REAL_HOME:
        raise AssertionError(
            f"the agent would start with the developer's HOME ({home}): start it inside a "
            "test (tests/conftest.py gives each test its own HOME), not a wider fixture"
        )
