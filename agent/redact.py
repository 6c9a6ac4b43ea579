"""Keep secrets out of everything we write: logs, transcripts, errors, status text.

A `Redactor` knows two kinds of secret. Values: the model's API key, every header value
sent to a server (and the token after `Bearer`), OpenAPI keys, and `env` values whose
names look secret; these come from Settings, so they are caught whatever their shape.
Patterns: `Bearer <token>`, `Authorization: <value>`, `sk-...` keys and `api_key=...` style
parameters, which catch secrets we were never told about (a server echoing its own token).

Redaction happens at the edges where text leaves the process: a log line, a transcript
record, an error message, a status field. What the model sees is not redacted (a tool's
output is its business), but nothing of ours puts a key into a message in the first place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.config import Settings

MASK = "[REDACTED]"
MIN_SECRET_LEN = 6  # shorter values ("1", "true") would mangle ordinary text
# Names of variables whose values are secrets (not PWD, SSH_AUTH_SOCK or SESSION_ID).
SECRET_NAME = re.compile(
    r"(API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|TOKEN|SECRET|PASSW(?:OR)?D|_PWD$|CREDENTIAL|COOKIE"
    r"|(?:^|_)AUTH(?:$|_(?!SOCK)))",
    re.I,
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{4,}"), rf"\1\2{MASK}"),
    (re.compile(r"\b(Basic)(\s+)[A-Za-z0-9+/]{12,}={0,2}"), rf"\1\2{MASK}"),
    (
        re.compile(
            r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key)(\s*[:=]\s*)"
            r"[^\s,;'\"}]+(?:[ \t]+[^\s,;'\"}]+)?"
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), MASK),
    (
        re.compile(
            r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password)"
            r"[\"']?\s*[=:]\s*[\"']?)[^\s&\"',;}]{4,}"
        ),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^/\s@]+@"), rf"\1{MASK}@"),  # user:password@host
)


@dataclass(frozen=True)
class Redactor:
    """Replace known secret values and secret-looking patterns with a mask."""

    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str | None]) -> Redactor:
        """Longest first, so a value that contains another is masked whole."""
        kept = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_LEN}
        return cls(tuple(sorted(kept, key=len, reverse=True)))

    @classmethod
    def from_settings(
        cls, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> Redactor:
        """Every secret the settings (and the secret-named variables of `environ`) hold."""
        return cls.of(secret_values(settings, environ or {}))

    def merged(self, other: Redactor) -> Redactor:
        return Redactor.of((*self.values, *other.values))

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def deep(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (a transcript record)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v) for v in value]
        return value


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """Every header value, and for `Scheme token` values the token alone too."""
    out: list[str] = []
    for value in headers.values():
        out.append(value)
        scheme, _, token = value.strip().partition(" ")
        if token and scheme.isalpha():
            out.append(token)
    return out


def secret_values(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    values: list[str | None] = [settings.llm.api_key]
    for server in settings.servers:
        values += header_secrets(server.headers)
        values.append(server.key)
        values += [v for k, v in server.env.items() if SECRET_NAME.search(k)]
    values += [v for k, v in environ.items() if SECRET_NAME.search(k) and k.isupper()]
    return [v for v in values if v]


PATTERNS_ONLY = Redactor()
