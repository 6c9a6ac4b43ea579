"""Where logins keep their tokens, and the secrets in those files.

`<state>/oauth/` holds one file per server URL (agent/auth/store.py writes and reads them
with the SDK's models). Every run's redactor masks the tokens and client secrets in them
from the start, so `Settings.redactor` reads them here, as plain JSON: config sits below
the auth layer and must not import it (nor pay for the SDK's auth models on every run).
"""

from __future__ import annotations

import json
from pathlib import Path

FOLDER = "oauth"


def login_folder(state_dir: Path) -> Path:
    return state_dir / FOLDER


def stored_secrets(state_dir: Path) -> list[str]:
    """Every token and client secret in the store: secrets to the redactor from the start."""
    found: list[str] = []
    for path in sorted(login_folder(state_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        tokens = data.get("tokens") or {}
        client = data.get("client") or {}
        for value in (
            tokens.get("access_token"),
            tokens.get("refresh_token"),
            client.get("client_secret"),
        ):
            if isinstance(value, str) and value:
                found.append(value)
    return found
