"""Agent Skills on disk: folders holding a `SKILL.md` whose front matter names the skill.

Where they are found: `skills/NAME/SKILL.md` in the user-level config folder (always), and
the project's own `.mcp-agent/skills/` and `.claude/skills/` (Claude Code's place, so the
skills a project already has work here) only when the working directory is trusted: a
cloned repository must not put instructions in front of the model by itself.

The front matter is the YAML subset SKILL.md files use (`key: value`, quoted strings,
`|` / `>` blocks, one level of nested keys or `- item` lists), parsed here without a YAML
dependency; what it cannot read is left out, never guessed.

Names follow the Agent Skills format (lowercase letters, digits and hyphens, at most 64
characters) wherever a skill comes from: a name is a handle the model types and a line of
the index, so one with a newline could forge index lines and one of a megabyte would ride in
every request. A description is one line of at most 1024 characters without control or
format characters, whoever wrote it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config.files import user_config_dir
from agent.config.settings import Settings

SKILL_FILE = "SKILL.md"
PROJECT_FOLDERS = (".mcp-agent/skills", ".claude/skills")
MAX_SKILL_BYTES = 1_000_000  # a SKILL.md larger than this is not a skill we load
DESCRIPTION_LINE = 120  # characters of a description in the index
MAX_NAME = 64  # the Agent Skills format's limits
MAX_DESCRIPTION = 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_KEY = re.compile(r"^([A-Za-z0-9_.-]+):(?:\s+(.*)|\s*)$")


@dataclass(frozen=True)
class LocalSkill:
    """A skill folder found on disk."""

    name: str
    description: str
    source: str  # "user" or "project"
    folder: Path
    frontmatter: Mapping[str, Any] = field(default_factory=dict)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md; no front matter gives ({}, text)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            return parse_front_matter(lines[1:end]), "\n".join(lines[end + 1 :])
    return {}, text


def parse_front_matter(lines: list[str]) -> dict[str, Any]:
    """Top-level keys of the YAML subset SKILL.md files use."""
    out: dict[str, Any] = {}
    index = 0
    while index < len(lines):
        match = _KEY.match(lines[index])
        index += 1
        if match is None:
            continue
        key, value = match.group(1), (match.group(2) or "").strip()
        block = [line for line in _indented(lines, index)]
        index += len(block)
        if value[:1] in ("|", ">"):
            out[key] = _block_scalar(block, folded=value[0] == ">", keep=value.endswith("+"))
        elif value:
            out[key] = _scalar(value)
        elif block and block[0].strip().startswith("- "):
            out[key] = [_scalar(line.strip()[2:].strip()) for line in block if line.strip()]
        elif block:
            out[key] = parse_front_matter(_dedent(block))
        else:
            out[key] = None
    return out


def _indented(lines: list[str], start: int) -> list[str]:
    """The lines from `start` that belong to the key above them (indented or blank)."""
    taken: list[str] = []
    for line in lines[start:]:
        if line.strip() and not line[:1].isspace():
            break
        taken.append(line)
    while taken and not taken[-1].strip():
        taken.pop()
    return taken


def _dedent(block: list[str]) -> list[str]:
    widths = [len(line) - len(line.lstrip()) for line in block if line.strip()]
    cut = min(widths) if widths else 0
    return [line[cut:] for line in block]


def _block_scalar(block: list[str], *, folded: bool, keep: bool) -> str:
    lines = _dedent(block)
    if not folded:
        text = "\n".join(lines)
    else:
        paragraphs = "\n".join(lines).split("\n\n")
        text = "\n".join(" ".join(p.split("\n")) for p in paragraphs)
    return text + "\n" if keep or not folded else text


def _scalar(value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == "'":
            return inner.replace("''", "'")
        return inner.encode("latin-1", "backslashreplace").decode("unicode_escape")
    if value.startswith("[") and value.endswith("]"):
        return [_scalar(v.strip()) for v in value[1:-1].split(",") if v.strip()]
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    value = value.split(" #", 1)[0].rstrip()  # a trailing comment
    return value


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a skill's name (None: it can). The name itself is not repeated:
    it may be a megabyte or hold escape sequences."""
    if len(name) > MAX_NAME:
        return f"its name is {len(name):,} characters (at most {MAX_NAME})"
    if not _NAME.fullmatch(name):
        return "its name is not lowercase letters, digits and single hyphens"
    return None


def one_line(description: str, limit: int = DESCRIPTION_LINE) -> str:
    """A description as one line: whitespace runs (newlines too) become one space, control
    and format characters (escapes, bidi overrides, zero-width) are dropped, cut at `limit`."""
    text = description[: limit * 8]  # enough for the line, even after what is dropped
    kept = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf") or c.isspace())
    line = " ".join(kept.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def clean_description(description: str) -> str:
    """A description as a skill keeps it: one line, at most MAX_DESCRIPTION characters."""
    return one_line(description, MAX_DESCRIPTION)


def skill_folders(settings: Settings, environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """(source, folder of skill folders) in precedence order: the user's first."""
    folders: list[tuple[str, Path]] = []
    user = user_config_dir(environ)
    if user is not None:
        folders.append(("user", user / "skills"))
    if settings.workspace_trusted:  # the working directory's own files: only when trusted
        folders += [("project", settings.workspace / sub) for sub in PROJECT_FOLDERS]
    return folders


def find_local_skills(
    settings: Settings, environ: Mapping[str, str]
) -> tuple[list[LocalSkill], list[str]]:
    """Every readable skill, and warnings for the folders that are not one."""
    skills: list[LocalSkill] = []
    warnings: list[str] = []
    for source, root in skill_folders(settings, environ):
        try:
            entries = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue  # no such folder: nothing there
        for folder in entries:
            found = _read_skill(source, folder)
            if isinstance(found, str):
                warnings.append(found)
            elif found is not None:
                skills.append(found)
    return skills, warnings


def _read_skill(source: str, folder: Path) -> LocalSkill | str | None:
    path = folder / SKILL_FILE
    try:
        if not path.is_file():
            return None
        if path.stat().st_size > MAX_SKILL_BYTES:
            return f"skill {path}: larger than {MAX_SKILL_BYTES:,} bytes, not used"
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"skill {path}: cannot read it ({exc.strerror})"
    meta, _ = split_front_matter(text)
    named = name_and_description("skill", path, meta)
    if isinstance(named, str):
        return named
    return LocalSkill(named[0], named[1], source, folder, meta)


def name_and_description(kind: str, path: Path, meta: Mapping[str, Any]) -> tuple[str, str] | str:
    """A file's front matter `name` (checked like a tool name) and one-line `description`,
    or the one line that says why the file is not used (skills and agent definitions)."""
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        return f"{kind} {path}: its front matter has no 'name', not used"
    if problem := name_problem(name.strip()):
        return f"{kind} {path}: {problem}, not used"
    if not isinstance(description, str) or not description.strip():
        return f"{kind} {path}: its front matter has no 'description', not used"
    return name.strip(), clean_description(description)
