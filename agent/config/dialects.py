"""Other clients' mcpServers dialects, read the way each client reads them.

Users paste what they have. Each dialect's words become ours before an entry is parsed:

- VS Code (`.vscode/mcp.json`): `servers` + `inputs`; `${workspaceFolder}`, `${userHome}`,
  `${env:NAME}`, `${pathSeparator}`; `${input:ID}` is asked once per run (masked when the
  input says `"password": true`), never written anywhere, and masked in all we write.
- Cursor: `envFile` (a dotenv file; the entry's own `env` wins), the same `${...}` words.
  An envFile in the working directory (relative, `${workspaceFolder}/...`, or a path
  inside it) is the folder's file, read only once the folder is trusted: a cloned
  repository's `.env` must not hand PYTHONPATH to the user's own server.
- Windsurf: `serverUrl` is `url`.
- Cline / Roo: `disabled: true` switches the server off; `autoApprove` / `alwaysAllow`
  (tools approved without asking) is read as `trust` when the entry sets none, and said
  on stderr each run (never silently); `transportType` is `type`.
- Claude Code (`.mcp.json`): `type` `stdio` / `sse` / `http`, `${VAR:-default}`: ours already.

Entries are plain JSON in, plain JSON out; `agent.config.servers.parse_server` decides the rest.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError
from agent.config.clients import read_client_file

# (input id, its description, whether to mask the answer) -> the answer
InputAsker = Callable[[str, str, bool], str]
_CLIENT_VAR = re.compile(
    r"\$\{(workspaceFolder|workspaceFolderBasename|userHome|pathSeparator|/"
    r"|env:([A-Za-z_][A-Za-z0-9_]*)|input:([A-Za-z0-9_.-]+))\}"
)
_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


class InputUnavailable(ConfigError):
    """An entry needs a `${input:...}` and nobody can be asked: that entry cannot be used
    in this run (the rest of its file can: agent/config/build.py skips it with a warning)."""


@dataclass
class Dialects:
    """What reading other clients' files needs, for one run: where the workspace is and
    whether it is trusted (its envFiles are read only then), how to ask for an
    `${input:...}` (None: nobody can be asked), and the answers so far (asked once per
    run, whichever files use them)."""

    workspace: Path
    environ: Mapping[str, str]
    ask: InputAsker | None = None
    trusted: bool = False
    answers: dict[str, str] = field(default_factory=dict)
    secret_answers: set[str] = field(default_factory=set)

    def entry(
        self, raw: dict[str, Any], inputs: Mapping[str, Mapping[str, Any]], where: str
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """One entry in our words, and the secrets it now holds (masked input answers)."""
        disabled = raw.get("disabled") is True or raw.get("enabled") is False
        used: list[str] = []
        data = self._expand(raw, inputs, where, used, ask=not disabled)
        data = _renamed(data, where)
        if "envFile" in data:
            data = self._with_env_file(data, raw.get("envFile"), where)
        approve = data.pop("autoApprove", None)
        allow = data.pop("alwaysAllow", None)
        if (auto := approve if approve is not None else allow) is not None:
            data = self._auto_approve(data, auto, where)
        secrets = tuple(self.answers[i] for i in used if i in self.secret_answers)
        return data, secrets

    # ----------------------------------------------------------------- ${...} words

    def _expand(
        self,
        value: Any,
        inputs: Mapping[str, Mapping[str, Any]],
        where: str,
        used: list[str],
        ask: bool,
    ) -> Any:
        if isinstance(value, str):
            return _CLIENT_VAR.sub(lambda m: self._word(m, inputs, where, used, ask), value)
        if isinstance(value, dict):
            return {k: self._expand(v, inputs, f"{where}.{k}", used, ask) for k, v in value.items()}
        if isinstance(value, list):
            return [
                self._expand(v, inputs, f"{where}[{i}]", used, ask) for i, v in enumerate(value)
            ]
        return value

    def _word(
        self,
        match: re.Match[str],
        inputs: Mapping[str, Mapping[str, Any]],
        where: str,
        used: list[str],
        ask: bool,
    ) -> str:
        word, env_name, input_id = match.group(1), match.group(2), match.group(3)
        if env_name is not None:  # as VS Code and Cursor: an unset variable is empty
            return self.environ.get(env_name, "")
        if input_id is not None:
            if not ask:  # a disabled server: nobody is asked for it
                return match.group(0)
            used.append(input_id)
            return self._input(input_id, inputs, where)
        home = self.environ.get("HOME") or str(Path.home())
        return {
            "workspaceFolder": str(self.workspace),
            "workspaceFolderBasename": self.workspace.name,
            "userHome": home,
            "pathSeparator": os.sep,
            "/": os.sep,
        }[word]

    def _input(self, input_id: str, inputs: Mapping[str, Mapping[str, Any]], where: str) -> str:
        if input_id in self.answers:
            return self.answers[input_id]
        declared = inputs.get(input_id)
        if declared is None:
            raise ConfigError(f"{where}: ${{input:{input_id}}} is not declared in 'inputs'")
        description = str(declared.get("description") or input_id)
        password = declared.get("password") is True
        if self.ask is None:
            raise InputUnavailable(
                f"{where}: needs ${{input:{input_id}}} ({description}), which is asked only at "
                f"a terminal: run it in one, or write ${{VAR}} and set that variable"
            )
        answer = self.ask(input_id, description, password)
        if not answer and "default" in declared:
            answer = str(declared["default"])
        self.answers[input_id] = answer
        if password:
            self.secret_answers.add(input_id)
        return answer

    # ----------------------------------------------------------------- keys

    def _with_env_file(self, data: dict[str, Any], written: Any, where: str) -> dict[str, Any]:
        """Cursor's and VS Code's `envFile`: its variables, under the entry's own `env`.

        One of the working directory's (see `of_workspace`) is left unread until the folder
        is trusted; `workspace_env_files` names it for the trust question and its one line.
        """
        data = dict(data)
        name = data.pop("envFile")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}.envFile: must be a path to a dotenv file")
        path = self.env_file_place(name)
        if not self.trusted and self.of_workspace(str(written), name, path):
            return data
        own = data.get("env") or {}
        if not isinstance(own, dict):
            return data  # parse_server names the bad `env`
        data["env"] = {**read_env_file(path, f"{where}.envFile"), **own}
        return data

    def words(self, text: str) -> str:
        """`text` with the client's `${...}` words expanded, no `${input:...}` asked."""
        return str(self._expand(text, {}, "", [], ask=False))

    def env_file_place(self, name: str) -> Path:
        """Where an envFile (its `${...}` words already expanded) is: relative to the workspace."""
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.workspace / path

    def of_workspace(self, written: str, expanded: str, place: Path) -> bool:
        """Whether an envFile is the working directory's: written relative to it (or as
        `${workspaceFolder}/...`, `..` included), or a path that lies inside it."""
        if "${workspaceFolder" in written or not Path(expanded).expanduser().is_absolute():
            return True
        workspace = Path(os.path.realpath(self.workspace))
        return Path(os.path.realpath(place)).is_relative_to(workspace)

    def workspace_env_files(self, paths: Iterable[Path]) -> tuple[str, ...]:
        """The working directory's envFiles that the mcpServers files at `paths` name (those
        that exist), relative to it where they lie inside it, without reading them and
        without asking any `${input:...}`, each file read as the agent loads it. A file
        that cannot be parsed names none here: its reader reports it (and the trust
        question will not remember a folder whose own file it is)."""
        found: list[str] = []
        workspace = Path(os.path.realpath(self.workspace))
        for path in paths:
            try:  # the loader's reader: JSON with comments, VS Code's `servers`, ...
                found_in = read_client_file(path, path.read_text(encoding="utf-8"), self.workspace)
            except (OSError, ValueError, ConfigError):
                continue
            for raw in found_in.servers.values():
                written = raw.get("envFile") if isinstance(raw, dict) else None
                if not isinstance(written, str) or not written.strip():
                    continue
                name = self.words(written)
                place = self.env_file_place(name)
                if place.is_file() and self.of_workspace(written, name, place):
                    real = Path(os.path.realpath(place))
                    inside = real.is_relative_to(workspace)
                    found.append(str(real.relative_to(workspace)) if inside else str(real))
        return tuple(dict.fromkeys(found))

    def _auto_approve(self, data: dict[str, Any], tools: Any, where: str) -> dict[str, Any]:
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ConfigError(f"{where}.autoApprove: must be a list of tool names")
        if "trust" in data or not tools:
            if tools:
                note(f"{where}: autoApprove is not read: this entry sets its own 'trust'")
            return data
        note(
            f"{where}: autoApprove is read as trust: {', '.join(tools)} run without asking "
            "(remove autoApprove to be asked)"
        )
        return {**data, "trust": tools}


def _renamed(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Windsurf's `serverUrl` and Cline's `transportType` under our names."""
    data = dict(data)
    if "serverUrl" in data:
        url = data.pop("serverUrl")
        if "url" in data and data["url"] != url:
            raise ConfigError(f"{where}: both 'url' and 'serverUrl' (Windsurf's), keep one")
        data["url"] = url
    if "transportType" in data:
        kind = data.pop("transportType")
        data.setdefault("type", kind)
    return data


def read_env_file(path: Path, where: str) -> dict[str, str]:
    """A dotenv file: `KEY=value` lines, `export` allowed, quotes removed, `#` comments."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path} ({exc.strerror})") from None
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.match(line)
        if match is None:
            raise ConfigError(f"{where}: {path} line {number} is not KEY=value")
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def declared_inputs(doc: Mapping[str, Any], path: Path) -> dict[str, Mapping[str, Any]]:
    """VS Code's `inputs` by id (a file without them has none)."""
    inputs = doc.get("inputs", [])
    if not isinstance(inputs, list):
        raise ConfigError(f"{path}: inputs: must be a list")
    return {str(i["id"]): i for i in inputs if isinstance(i, dict) and "id" in i}


def note(message: str) -> None:
    """A fact about how a file was read that the user should not miss (not a warning)."""
    _say("note", message)


def warning(message: str) -> None:
    """A choice made for the user that they should know of: which of two files' entries
    for one server is used, an entry skipped."""
    _say("warning", message)


def _say(kind: str, message: str) -> None:
    """One stderr line. It may quote a file's words (a key, a server's name, an input's
    description: a cloned repository's), so a control or invisible character is shown
    escaped: this layer cannot reach agent/ui/safe.py's writer."""
    shown = "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message
    )
    print(f"{kind}: {shown}", file=sys.stderr)
