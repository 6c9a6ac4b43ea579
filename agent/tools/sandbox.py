"""A stdio server's command line under its sandbox, and what each server runs under.

The policy is decided with the settings (agent/config/sandbox.py); here it becomes the
command that is spawned: `bwrap ... -- command args`. The prestart (agent/tools/prestart.py)
and the connection (agent/tools/mcp_transports.py) both take it from `launch_argv`, so the
connection adopts a prestarted server only when it runs under the same sandbox.
"""

from __future__ import annotations

import json
import os

from agent.common.sandbox import Policy, bwrap_argv, find_denial
from agent.config.sandbox import SANDBOX_FLAG
from agent.config.settings import ServerConfig


def launch_argv(config: ServerConfig) -> tuple[str, ...]:
    """The command line that starts `config`'s process (wrapped in bwrap when sandboxed)."""
    argv = [config.command or "", *config.args]
    if config.policy is None:
        return tuple(argv)
    return tuple(bwrap_argv(config.policy, argv))


def shell_policy(config: ServerConfig) -> Policy | None:
    """The bundled server's shell's policy, as passed on its command line."""
    args = list(config.args)
    if SANDBOX_FLAG not in args[:-1]:
        return None
    try:
        return Policy.from_json(args[args.index(SANDBOX_FLAG) + 1])
    except ValueError:
        return None


def runs_under(config: ServerConfig, problem: str | None = None, *, short: bool = False) -> str:
    """What `config` runs under, for /sandbox (`short`: a /servers cell). `problem`: why
    bubblewrap cannot sandbox in this run (then nothing is)."""
    if config.type != "stdio":
        return "remote" if short else "remote: runs elsewhere, not sandboxed here"
    if config.policy is not None:
        return _words(config.policy, short)
    if (shell := shell_policy(config)) is not None:
        return f"shell {_words(shell, short)}"
    wanted = config.sandbox is not None and config.sandbox.mode != "off"
    if problem is not None and (wanted or _bundled(config)):
        return "off (no bwrap)" if short else f"off: {problem}"
    return "off"


def _words(policy: Policy, short: bool) -> str:
    if not short:
        return policy.summary()
    if policy.mode == "off":
        return "off"
    return f"{policy.mode}, {'network' if policy.network else 'no network'}"


def _bundled(config: ServerConfig) -> bool:
    return any(a.endswith("agent/server/__main__.py") for a in config.args)


def start_note(config: ServerConfig, log: str) -> str:
    """For a sandboxed server that failed to start: what its log shows the sandbox denied,
    and the entry's words that would allow it ("" when the log shows no denial)."""
    policy = config.policy
    if policy is None:
        return ""
    denial = find_denial(log, 1, policy, config.cwd or os.getcwd())
    if denial is None:
        return ""
    fix: list[str] = []
    if denial.write:
        missing = [p for p in denial.write if not os.path.exists(p)]
        first = f" after creating {', '.join(missing)}" if missing else ""
        fix.append(f'"write": {json.dumps(list(denial.write))}{first}')
    if denial.network:
        fix.append('"network": true')
    allow = f' (if it needs that, its entry\'s "sandbox" can allow it: {", ".join(fix)})'
    return f"; the sandbox denied {denial.words()}{allow if fix else ''}"
