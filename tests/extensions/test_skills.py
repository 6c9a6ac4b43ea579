"""Skills through the CLI and the REPL, as a user has them: folders with a SKILL.md in the
user-level config folder (and a trusted project's), and skills an MCP server publishes with
the `io.modelcontextprotocol/skills` extension (tests/support/skills_server.py).

What counts is what the scripted model received: the index (name + one line) in the first
request, the full text only after the model (or /skill) asked for it, and a tampered
server skill refused.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from agent.extensions.skill_files import split_front_matter
from tests.support import skills_server
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages

BODY = "PDF-SKILL-BODY: split with qpdf, never with ghostscript"
REFERENCE = "PDF-REFERENCE-TEXT: page ranges are 1-based"


def load_skill_description(request: dict[str, Any]) -> str:
    tool = next(t for t in request["tools"] if t["function"]["name"] == "load_skill")
    return str(tool["function"]["description"])


def write_skill(root: Path, name: str, description: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: |\n  {description}\n  (second line)\n"
        f"license: MIT\n---\n\n# {name}\n\n{body}\nSee references/pages.md.\n",
        encoding="utf-8",
    )
    return folder


def user_skills(workdir: Path) -> Path:
    """The user-level skills folder tests.support.cli points XDG_CONFIG_HOME at."""
    return workdir / "xdg-config" / "mcp-agent" / "skills"


def test_local_skill_index_first_full_text_and_files_only_when_asked(tmp_path: Path) -> None:
    folder = write_skill(user_skills(tmp_path), "pdf", "Split and merge PDF files", BODY)
    (folder / "references").mkdir()
    (folder / "references" / "pages.md").write_text(REFERENCE, encoding="utf-8")
    (tmp_path / "outside.md").write_text("OUTSIDE-SECRET", encoding="utf-8")
    script = [
        tool_calls(("load_skill", {"name": "pdf"})),
        tool_calls(
            ("load_skill", {"name": "pdf", "file": "references/pages.md"}),
            ("load_skill", {"name": "pdf", "file": "../../../../outside.md"}),
        ),
        text("split it with qpdf"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "split report.pdf"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "split it with qpdf\n"
    first, second, third = llm.requests
    index = load_skill_description(first)
    assert "- pdf: Split and merge PDF files (second line)" in index  # one line
    assert BODY not in json.dumps(first) and REFERENCE not in json.dumps(first)
    loaded = tool_messages(second)[0]
    assert BODY in loaded and "Skill 'pdf' (user skill)" in loaded
    assert "Its files: references/pages.md" in loaded
    assert REFERENCE not in json.dumps(second)
    read, escaped = tool_messages(third)[-2:]
    assert read == REFERENCE
    assert escaped.startswith("Error:") and "outside the skill's folder" in escaped
    assert "OUTSIDE-SECRET" not in json.dumps(third)
    llm.assert_complete()


def test_a_file_is_refused_before_its_skill_is_loaded(tmp_path: Path) -> None:
    write_skill(user_skills(tmp_path), "pdf", "Split PDF files", BODY)
    script = [tool_calls(("load_skill", {"name": "pdf", "file": "SKILL.md"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    refused = tool_messages(llm.requests[1])[0]
    assert "load the skill 'pdf' first" in refused and BODY not in refused


def test_project_skills_are_read_only_in_a_trusted_folder(tmp_path: Path) -> None:
    write_skill(user_skills(tmp_path), "deploy", "Deploy (user)", "USER-DEPLOY")
    write_skill(tmp_path / ".claude" / "skills", "deploy", "Deploy (project)", "PROJECT")
    write_skill(tmp_path / ".mcp-agent" / "skills", "lint", "Lint the code", "LINT")
    with ScriptedLLM(text("one"), text("two")) as llm:
        plain = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url)
        trusted = run_cli(["--trust-workspace", "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert plain.returncode == 0 and trusted.returncode == 0, plain.stderr + trusted.stderr
    untrusted_index = load_skill_description(llm.requests[0])
    assert "- deploy: Deploy (user)" in untrusted_index
    assert "project" not in untrusted_index and "lint" not in untrusted_index
    index = load_skill_description(llm.requests[1])
    assert "- deploy: Deploy (user)" in index  # the user's own keeps the bare name
    assert "- project:deploy: Deploy (project)" in index  # none is dropped
    assert "- lint: Lint the code" in index


def test_front_matter_subset_is_parsed_and_broken_skills_are_warned_about(tmp_path: Path) -> None:
    meta, body = split_front_matter(
        "---\nname: 'x'\ndescription: >\n  folded\n  text\nallowed-tools: [a, b]\n"
        'metadata:\n  version: "1.0"\n---\nbody\n'
    )
    assert meta == {
        "name": "x",
        "description": "folded text",
        "allowed-tools": ["a", "b"],
        "metadata": {"version": "1.0"},
    }
    assert body == "body"
    bad = user_skills(tmp_path) / "nameless"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\ndescription: no name\n---\n", encoding="utf-8")
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "nameless/SKILL.md: its front matter has no 'name'" in proc.stderr
    assert "load_skill" not in json.dumps(llm.requests[0]["tools"])  # no skill, no tool


def test_repl_lists_skills_with_source_and_slash_skill_loads_one_into_the_turn(
    tmp_path: Path,
) -> None:
    write_skill(user_skills(tmp_path), "pdf", "Split and merge PDF files", BODY)
    with ScriptedLLM(text("done")) as llm:
        proc = run_cli(
            ["-i"], tmp_path, base_url=llm.base_url, stdin="/skills\n/skill pdf split a.pdf\n"
        )
    assert proc.returncode == 0, proc.stderr
    assert "pdf" in proc.stdout and "user" in proc.stdout
    assert "Split and merge PDF files" in proc.stdout
    request = llm.requests[0]["messages"][-1]["content"]
    assert request.startswith("split a.pdf\n\nSkill 'pdf' (user skill)") and BODY in request
    llm.assert_complete()


def test_find_tools_finds_skills_when_tool_search_is_on(tmp_path: Path) -> None:
    write_skill(user_skills(tmp_path), "pdf", "Split and merge PDF files", BODY)
    config = tmp_path / "config.toml"
    config.write_text('[agent]\ntool_search = "on"\n')
    script = [tool_calls(("find_tools", {"query": "merge pdf"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["--config", str(config), "-p", "merge"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    found = tool_messages(llm.requests[1])[0]
    assert "- skill pdf: Split and merge PDF files (second line) (load it with load_skill)" in found
    llm.assert_complete()


# -- skills over MCP (io.modelcontextprotocol/skills) ------------------------------------


def skills_server_args(
    tmp_path: Path, *, hostile: bool = False
) -> tuple[list[str], dict[str, str]]:
    log = tmp_path / "skills-server.log"
    env = {"SKILLS_SERVER_LOG": str(log)} | ({"SKILLS_SERVER_HOSTILE": "1"} if hostile else {})
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": [skills_server.__file__],
        "mode": "2026-07-28",  # the extension is defined on the 2026-07-28 protocol
        "env": env,
    }
    config = mcp_json(tmp_path, {"docs": entry})
    return ["--mcp-config", str(config)], {"log": str(log)}


def test_server_skills_are_indexed_loaded_on_demand_and_digest_checked(tmp_path: Path) -> None:
    args, paths = skills_server_args(tmp_path)
    script = [
        tool_calls(("load_skill", {"name": "docs:release-notes"})),
        tool_calls(
            ("load_skill", {"name": "docs:release-notes", "file": "templates/notes.md"}),
            ("load_skill", {"name": "docs:tampered"}),
            ("read_resource", {"server": "docs", "uri": "skill://tampered/SKILL.md"}),
        ),
        text("notes written"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "-p", "write the notes"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    first, second, third = llm.requests
    index = load_skill_description(first)
    assert "- docs:release-notes: Write release notes from a list of merged changes" in index
    assert "(from MCP server 'docs')" in index
    assert skills_server.RELEASE_BODY not in json.dumps(first)
    loaded = tool_messages(second)[0]
    assert skills_server.RELEASE_BODY in loaded
    assert "skill 'docs:release-notes' from MCP server 'docs'" in loaded
    template, tampered, read = tool_messages(third)[-3:]
    assert "NOTES-TEMPLATE" in template
    assert tampered.startswith("Error: skill 'docs:tampered' refused")
    assert "does not match the digest" in tampered
    assert "refused" in read  # read_resource of a skill's SKILL.md is a load, checked the same
    assert "TAMPERED-BODY" not in json.dumps(llm.requests)
    served = Path(paths["log"]).read_text().splitlines()
    assert served[0] == "skills/list"  # the listing at start fetched no file
    assert "skills/get skill://tampered/SKILL.md" in served  # refreshed once, then refused
    llm.assert_complete()


def test_a_hostile_servers_names_and_descriptions_cannot_forge_or_flood_the_index(
    tmp_path: Path,
) -> None:
    """Names are skill names (a newline or a megabyte skips the entry, and the warning
    repeats neither), a description is one clean line, every listed line stays marked as
    the server's, and the index keeps to its budget, counting the rest."""
    args, _ = skills_server_args(tmp_path, hostile=True)
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli([*args, "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert llm.request_bytes[0] < 40_000  # the megabyte name used to ride in every request
    index = load_skill_description(llm.requests[0])
    listed = [line for line in index.splitlines() if line.startswith("- ")]
    more = listed.pop()
    assert more.startswith("- … ") and "more not listed here" in more
    assert all(line.endswith("(from MCP server 'docs')") for line in listed), listed
    shown = int(more.split()[2])
    assert len(listed) + shown == 2 + 2 + skills_server.BULK  # honest, noisy, forger, bulk
    assert not any(line.startswith(("- docs:boss", "- docs:helper")) for line in listed)
    [noisy] = [line for line in listed if line.startswith("- docs:noisy: ")]
    assert "Tidy files - docs:boss" in noisy and len(noisy) < 200  # one line, cut
    assert not any(c in index for c in "\x1b\x07\u202e")
    assert "aaaa" not in json.dumps(llm.requests) and "aaaa" not in proc.stderr
    assert "skipped a skill" in proc.stderr and "(and 1 more)" in proc.stderr
    assert "ALWAYS" not in proc.stderr


def test_a_server_skill_cannot_forge_the_end_of_its_own_text(tmp_path: Path) -> None:
    args, _ = skills_server_args(tmp_path, hostile=True)
    script = [tool_calls(("load_skill", {"name": "docs:forger"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "-p", "format a date"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    loaded = tool_messages(llm.requests[1])[0]
    assert skills_server.FORGED_END not in loaded  # its own end line is neutralised
    begin, *body, end = loaded.splitlines()
    seal = begin.rsplit("seal ", 1)[1].rstrip("]")
    assert end == f"[end of skill 'docs:forger', seal {seal}]"
    digest = hashlib.sha256(skills_server.FORGER_BODY.encode()).hexdigest()
    assert len(seal) == 16 and digest.startswith(seal)  # the same text, the same prompt
    assert skills_server.FORGER_ORDER in body  # inside the envelope, and only there
    assert "[quoted end of skill 'docs:forger']" in body
    assert sum(line.startswith("[end of") for line in loaded.splitlines()) == 1
    llm.assert_complete()
