"""A stdio server's environment: what it inherits from us, and what it never does.

Every child we start for the user's config (a stdio server, whether connected or started
early, and a hook's command) gets it, so the rule is written once: PATH and what a
launcher needs survive, our secrets do not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent.common.redact import PATTERNS_ONLY, is_secret_name

# What a stdio server inherits from us: enough to run (PATH is never lost), never our secrets.
_SAFE_ENV_KEYS = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR", "TZ"}
    | {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}
    | {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}
)
# What a launcher (uvx, npx, pip, node) needs to reach its registry behind a TLS-inspecting
# proxy, and its own settings: certificate bundles, UV_* / PIP_* / NPM_CONFIG_* and the XDG
# folders (where uv and npm keep their caches). Never one whose name says secret
# (UV_INDEX_..._PASSWORD, NPM_CONFIG__AUTHTOKEN) or whose value holds a credential
# (https://user:pass@index/simple): those reach a server only through its own `env`.
_CERT_ENV_KEYS = frozenset(
    {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
    | {"NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO", "NIX_SSL_CERT_FILE"}
)
_LAUNCHER_ENV_PREFIXES = ("UV_", "PIP_", "PIPX_", "NPM_CONFIG_", "npm_config_", "XDG_")
_SECRETISH = re.compile(r"(?i)auth|token|pass|secret|key|cred")  # glued: NPM_CONFIG__AUTHTOKEN


# Variables that make a program load or run code they name (a module path, a preload, a
# startup file, interpreter options): one set by a folder's file runs that folder's code
# inside the process. The trust question shows each with its value (agent/config/trust.py).
LOADER_VARIABLES = frozenset(
    {"PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT"}
    | {"NODE_OPTIONS", "NODE_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH"}
    | {"BASH_ENV", "ENV", "ZDOTDIR", "SHELLOPTS", "PS4", "PROMPT_COMMAND"}
    | {"PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS"}
    | {"_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH"}
    | {"UV_PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX", "NPM_CONFIG_PREFIX", "npm_config_prefix"}
)


def is_loader_variable(name: str) -> bool:
    """Whether setting `name` can make a program run code the value names (DYLD_* too)."""
    return name in LOADER_VARIABLES or name.startswith(("DYLD_", "LD_"))


def server_env(own: Mapping[str, str], parent: Mapping[str, str]) -> dict[str, str]:
    """A stdio server's environment: a safe base from the parent plus its own `env`.

    PATH, locale, proxy and certificate settings survive (a `uvx` or `npx -y` server must
    reach its registry); API keys and other secrets of ours never reach a server unless
    its own `env` names them.
    """
    base = {k: v for k, v in parent.items() if _passed_to_servers(k, v)}
    base.update(own)
    return base


def _passed_to_servers(name: str, value: str) -> bool:
    """The rule of `server_env` for one of our variables (see _CERT_ENV_KEYS)."""
    if name in _SAFE_ENV_KEYS or name.startswith("LC_"):
        return True
    if name not in _CERT_ENV_KEYS and not name.startswith(_LAUNCHER_ENV_PREFIXES):
        return False
    if is_secret_name(name) or _SECRETISH.search(name):
        return False
    return PATTERNS_ONLY(value) == value
