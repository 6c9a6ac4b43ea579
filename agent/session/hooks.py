"""The session's side of the user's hooks (agent.extensions.hooks): read once at start, the fields
every event carries, SessionStart.

Kept out of agent.session so the wiring there stays a few lines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.common.transcript import Loaded
from agent.config.files import user_config_dir
from agent.config.settings import Settings
from agent.extensions.hook_files import HookSet, load_hooks
from agent.extensions.hooks import Hooks
from agent.loop.approval import ApprovalPolicy
from agent.loop.react import Agent


def read_hooks(settings: Settings, stderr: Console) -> HookSet:
    """The active hooks; what was skipped is said here. An untrusted folder's own
    hooks.json is named in agent/config/trust.py's one line with its other files."""
    hookset = load_hooks(os.environ, settings.workspace, settings.workspace_trusted)
    for note in hookset.notes:
        stderr.print(f"warning: {note}", markup=False, highlight=False, style="yellow")
    return hookset


PERMISSION_MODES = {"ask": "default", "yes": "bypassPermissions", "read-only": "plan"}


def session_hooks(
    hookset: HookSet, settings: Settings, policy: ApprovalPolicy, session: Loaded
) -> Hooks:
    """The hooks with the fields every event carries, read when it fires (the approval mode
    and model may change in the REPL)."""
    transcript = session.transcript

    def common() -> dict[str, Any]:
        return {
            "session_id": transcript.session_id,
            "transcript_path": str(transcript.path),
            "permission_mode": PERMISSION_MODES.get(policy.mode, policy.mode),
            "model": settings.llm.model,
        }

    return Hooks(
        hookset,
        os.environ,
        settings.workspace,
        common,
        cwd=hook_folder(settings, os.environ),
        workspace_trusted=settings.workspace_trusted,
    )


def hook_folder(settings: Settings, environ: Mapping[str, str]) -> Path:
    """Where the hooks' commands run: the working directory once it is trusted; else the
    user's config folder (where the user's hooks.json is), or home. A user's hook such as
    `npx prettier` run inside a cloned repository would run the repository's own
    node_modules/.bin; the hook still learns the project (MCP_AGENT_PROJECT_DIR, `cwd` in
    its JSON) and whether it is trusted (MCP_AGENT_WORKSPACE_TRUSTED, `workspace_trusted`)."""
    if settings.workspace_trusted:
        return settings.workspace
    user = user_config_dir(environ)
    if user is not None and user.is_dir():
        return user
    return Path(environ.get("HOME") or Path.home())


async def start_session(agent: Agent, resumed: bool, stderr: Console) -> None:
    """SessionStart hooks: their context joins the system prompt; warnings are shown."""
    if agent.hooks is None or not agent.hooks.has("SessionStart"):
        return
    outcome = await agent.hooks.session_start("resume" if resumed else "startup")
    for warning in outcome.warnings:
        stderr.print(f"warning: {warning}", markup=False, highlight=False, style="yellow")
    if outcome.context:
        extra = "\n".join(outcome.context)
        agent.memory.system_prompt += f"\n\nContext from the user's SessionStart hooks:\n{extra}"
