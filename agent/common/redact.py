"""Keep secrets out of everything we write: logs, transcripts, errors, status text.

A `Redactor` knows two kinds of secret. Values: the model's API key, every header value
sent to a server (and the token after `Bearer`), OpenAPI keys, and `env` values whose
names look secret; these come from Settings, so they are caught whatever their shape.
Patterns: `Bearer <token>`, `Authorization: <scheme> <token>`, `sk-...` keys and `api_key=...`
style parameters, which catch secrets we were never told about (a server echoing its own
token). The patterns mask only credential-shaped values, so an error message such as
`headers.Authorization: Input should be a valid string` keeps its words.

Redaction happens at the edges where text leaves the process: a log line, a transcript
record, an error message, a status field. What the model sees is not redacted (a tool's
output is its business), but nothing of ours puts a key into a message in the first place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MASK = "[REDACTED]"
MIN_SECRET_LEN = 6  # shorter values ("1", "true") would mangle ordinary text
# Name parts that mark a variable or header as holding a secret (DB_PASS, SERVICE_KEY,
# X-Auth-Token), and spellings that are secret even when glued into a word (PGPASSWORD).
# Not SESSION or TOKENS alone: DESKTOP_SESSION, XDG_SESSION_TYPE and MAX_TOKENS are harmless.
_SECRET_PARTS = frozenset(
    {"PASS", "PASSWD", "PASSWORD", "PASSPHRASE", "PWD", "SECRET", "SECRETS", "TOKEN"}
    | {"KEY", "KEYS", "APIKEY", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH"}
    | {"AUTHORIZATION", "COOKIE", "COOKIES", "SESSIONTOKEN", "SESSIONKEY", "SESSIONID"}
)
_SECRET_GLUED = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIAL|APIKEY|ACCESSKEY")
# A last part that says the value is about a secret, not the secret: SSH_AUTH_SOCK is a
# socket path, AUTH_TYPE a scheme name, TOKEN_URL an endpoint, PASSWORD_FILE a path.
_HARMLESS_LAST = frozenset(
    {"SOCK", "SOCKET", "PATH", "FILE", "DIR", "TYPE", "NAME", "URL", "URI", "ENDPOINT"}
    | {"HOST", "PORT", "MODE", "METHOD", "LAYOUT", "LENGTH", "SIZE", "TIMEOUT", "TTL"}
)
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working directories


def is_secret_name(name: str) -> bool:
    """Whether a variable or header name says its value is a secret.

    Names are split into parts (`DB_PASS`, `X-Api-Key`, `apiKey`) so a secret word counts
    only as a whole part: KEYBOARD_LAYOUT and TOKENIZERS_PARALLELISM stay readable.
    """
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper()
    parts = [p for p in re.split(r"[^A-Z0-9]+", snake) if p]
    if not parts or snake in _NOT_SECRET or parts[-1] in _HARMLESS_LAST:
        return False
    return any(p in _SECRET_PARTS for p in parts) or bool(_SECRET_GLUED.search(snake))


_VALUE = r"[^\s,;'\"}]"  # one character of a header value
# A credential after `Authorization:`: `<scheme> <token>` for a known scheme, or one
# token-like word (>= 8 characters with a digit, or a long run of letters). Prose after
# the colon ("Input should be a valid string") is never taken for a credential.
_AUTH_SCHEMES = (
    r"bearer|basic|token|digest|bot|api-?key|negotiate|ntlm|oauth|dpop|hoba|mutual"
    r"|gnap|sso-key|aws4-hmac-sha256"
)
_HEADER_CREDENTIAL = (
    rf"(?:(?:{_AUTH_SCHEMES})[ \t]+{_VALUE}{{4,}}"
    rf"|(?={_VALUE}*[0-9]){_VALUE}{{8,}}|[A-Za-z0-9+/=_-]{{24,}})"
)
# A `key=value` secret: at least 4 characters with a digit or symbol, or 12 or more.
_PARAM_VALUE = r"(?:(?=[^\s&\"',;}]*[0-9_~+/=-])[^\s&\"',;}]{4,}|[^\s&\"',;}]{12,})"
# Each pattern with the words one of its matches must contain (case-insensitively): text
# with none of them skips the patterns, one cheap search instead of six substitutions.
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    (("bearer",), re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{4,}"), rf"\1\2{MASK}"),
    (("basic",), re.compile(r"\b(Basic)(\s+)[A-Za-z0-9+/]{12,}={0,2}"), rf"\1\2{MASK}"),
    (
        ("authorization", "api-key"),
        re.compile(
            r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key)(\s*[:=]\s*)"
            + _HEADER_CREDENTIAL
        ),
        rf"\1\2{MASK}",
    ),
    (("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), MASK),
    (
        ("apikey", "api_key", "api-key", "token", "secret", "password"),
        re.compile(
            r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password)"
            r"[\"']?\s*[=:]\s*[\"']?)" + _PARAM_VALUE
        ),
        rf"\1{MASK}",
    ),
    (("://",), re.compile(r"(?i)(://[^/\s:@]+:)[^/\s@]+@"), rf"\1{MASK}@"),  # user:pass@host
)


class _Words:
    """Whether any of the patterns' trigger words occurs, case-insensitively. A `find` per
    word on the lowered text is about 4x faster than one regex alternation (a server's log
    flood is redacted line by line: 20,000 lines)."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words = tuple(sorted({word.lower() for word in words}))

    def search(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self.words)


_TRIGGER = _Words(word for words, _, _ in _PATTERNS for word in words)


@dataclass(frozen=True)
class Redactor:
    """Replace known secret values and secret-looking patterns with a mask."""

    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str | None]) -> Redactor:
        """Longest first, so a value that contains another is masked whole."""
        kept = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET_LEN}
        return cls(tuple(sorted(kept, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        if len(text) < MIN_SECRET_LEN:
            return text
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        if _TRIGGER.search(text):  # one pass decides whether any pattern can match at all
            for _, pattern, replacement in _PATTERNS:
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


PATTERNS_ONLY = Redactor()
