"""Tokens and client registrations on disk, one file per server URL.

`<state>/oauth/` is private (0700); each file is 0600, written to a temporary file and
renamed, so a crash never leaves half a token file. Files are keyed by the canonical server
URL (the RFC 8707 resource form), so two names for the same server share one login and a
renamed server keeps it. Besides what the SDK's `TokenStorage` holds (tokens and the client
registration) a file keeps when the access token expires and the authorization server's
metadata: after a restart the SDK would otherwise treat a stored token as never expiring
and refresh it at the resource server's origin instead of the real token endpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from agent.config.login_files import login_folder

LOCK_WAIT = 60.0  # seconds a refresh waits for another run's refresh of the same tokens
LOCK_POLL = 0.05


def canonical_url(url: str) -> str:
    """The server URL as the authorization spec names a resource (no fragment, lower-case
    scheme and host)."""
    return resource_url_from_server_url(url)


def token_file(state_dir: Path, url: str) -> Path:
    digest = hashlib.sha256(canonical_url(url).encode()).hexdigest()[:24]
    return login_folder(state_dir) / f"{digest}.json"


@dataclass(frozen=True)
class AuthState:
    """What /servers says about a server's login."""

    logged_in: bool
    expires_at: float | None = None


class FileTokenStorage:
    """The SDK's `TokenStorage` protocol, on disk; plus expiry and metadata (see module)."""

    def __init__(self, state_dir: Path, server_url: str) -> None:
        self.server_url = canonical_url(server_url)
        self.path = token_file(state_dir, server_url)
        self.on_secret: list[Callable[[str], None]] = []  # told every new secret value
        self._lock_fd: int | None = None

    # -- the SDK's protocol

    async def get_tokens(self) -> OAuthToken | None:
        raw = self._read().get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._tell(tokens.access_token, tokens.refresh_token)
        self._update(
            tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = self._read().get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._tell(client_info.client_secret)
        self._update(client=client_info.model_dump(mode="json", exclude_none=True))

    # -- what the SDK does not keep

    def expires_at(self) -> float | None:
        value = self._read().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    def metadata(self) -> OAuthMetadata | None:
        raw = self._read().get("metadata")
        try:
            return OAuthMetadata.model_validate(raw) if raw else None
        except ValueError:
            return None

    def set_metadata(self, metadata: OAuthMetadata | None) -> None:
        if metadata is not None:
            self._update(metadata=metadata.model_dump(mode="json", exclude_none=True))

    def state(self) -> AuthState:
        data = self._read()
        tokens = data.get("tokens") or {}
        if not tokens.get("access_token"):
            return AuthState(logged_in=False)
        expires = data.get("expires_at")
        return AuthState(
            logged_in=True,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
        )

    def forget_tokens(self) -> bool:
        """Drop the tokens, keep the client registration; whether there were any."""
        data = self._read()
        had = bool(data.pop("tokens", None))
        data.pop("expires_at", None)
        self._write(data)
        return had

    def delete(self) -> bool:
        """Log out: remove the whole file (tokens and registration)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    # -- one refresh at a time, across processes

    async def lock(self) -> None:
        """Hold the store's lock (flock on a file beside it) until `unlock`.

        A server that rotates refresh tokens takes each one once: two runs refreshing with
        the same token would leave one of them without a login. Under the lock a run
        re-reads the store first, so it refreshes with the token the other run stored.
        A run that dies releases the lock with its file descriptor; after `LOCK_WAIT` the
        refresh goes ahead unlocked rather than not at all.
        """
        if self._lock_fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            with anyio.move_on_after(LOCK_WAIT):
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        await anyio.sleep(LOCK_POLL)
                        continue
                    self._lock_fd = fd
                    return
        except BaseException:  # cancelled while waiting
            os.close(fd)
            raise
        os.close(fd)

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- the file

    def _tell(self, *values: str | None) -> None:
        for value in values:
            if value:
                for callback in self.on_secret:
                    callback(value)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _update(self, **fields: Any) -> None:
        data = self._read()
        data.update(fields, server_url=self.server_url)
        self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")  # 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
