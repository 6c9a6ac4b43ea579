"""Images a tool returns are drawn in the terminal only where the terminal announces an image
protocol (kitty's or iTerm2's); everywhere else, and in tmux, the saved file's path alone."""

from __future__ import annotations

import base64
import io
import sys
from pathlib import Path

import pexpect
from rich.console import Console

from agent.common.images import SavedImage
from agent.loop.events import ToolCallFinished
from agent.ui.inline_image import MAX_INLINE_BYTES, escape_sequences, inline_protocol
from agent.ui.render import EventRenderer
from tests.support.cli import RUN_MCP, cli_env, mcp_json
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

IMAGE_SERVER = SUPPORT / "image_server.py"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40  # 10 KB: several kitty chunks


def test_the_protocol_is_what_the_terminal_announces_never_assumed() -> None:
    assert inline_protocol({"TERM": "xterm-kitty"}, True) == "kitty"
    assert inline_protocol({"TERM_PROGRAM": "WezTerm"}, True) == "kitty"
    assert inline_protocol({"TERM_PROGRAM": "iTerm.app"}, True) == "iterm"
    assert inline_protocol({"LC_TERMINAL": "iTerm2"}, True) == "iterm"
    assert inline_protocol({"TERM": "xterm-256color"}, True) is None
    assert inline_protocol({"TERM": "xterm-kitty"}, False) is None  # not a terminal
    assert inline_protocol({"TERM": "xterm-kitty", "TMUX": "/tmp/t,1,0"}, True) is None


def test_kitty_gets_png_in_chunks_and_iterm_gets_one_inline_file() -> None:
    kitty = escape_sequences("kitty", PNG, "image/png")
    assert len(kitty) > 1 and kitty[0].startswith("\x1b_Ga=T,f=100,m=1;")
    assert kitty[-1].startswith("\x1b_Gm=0;") and all(s.endswith("\x1b\\") for s in kitty)
    payload = "".join(s.split(";", 1)[1][:-2] for s in kitty)
    assert base64.b64decode(payload) == PNG
    assert escape_sequences("kitty", b"\xff\xd8jpeg", "image/jpeg") == []  # kitty: PNG only
    (iterm,) = escape_sequences("iterm", PNG, "image/png")
    assert iterm.startswith(f"\x1b]1337;File=inline=1;size={len(PNG)};") and iterm.endswith("\x07")
    assert escape_sequences("iterm", b"x" * (MAX_INLINE_BYTES + 1), "image/png") == []


def _render(tmp_path: Path, protocol: str | None) -> str:
    picture = tmp_path / "shot.png"
    picture.write_bytes(PNG)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    renderer = EventRenderer(console, stream_answer=False, inline_images=protocol)  # type: ignore[arg-type]
    saved = SavedImage(mime_type="image/png", bytes=len(PNG), path=str(picture))
    renderer.handle(
        ToolCallFinished(
            "c1", "img__shot", "img", "shot", {}, "[image]", False, 3.0, images=(saved,)
        )
    )
    return out.getvalue()


def test_the_renderer_draws_the_saved_picture_under_its_path(tmp_path: Path) -> None:
    shown = _render(tmp_path, "kitty")
    assert "image saved:" in shown and "\x1b_Ga=T,f=100" in shown
    assert shown.index("image saved:") < shown.index("\x1b_G")
    plain = _render(tmp_path, None)
    assert "image saved:" in plain and "\x1b_G" not in plain and "\x1b]1337" not in plain


def _repl_output(tmp_path: Path, extra_env: dict[str, str]) -> str:
    server = {"command": sys.executable, "args": [str(IMAGE_SERVER), "--big-mb", "0.01"]}
    config = mcp_json(tmp_path, {"img": server})
    with ScriptedLLM(tool_calls(("img__screenshot", {})), text("a picture")) as llm:
        env = {**cli_env(tmp_path, llm.base_url, "sk-test"), "TERM": "xterm-256color"}
        env = {k: v for k, v in env.items() if k not in ("TMUX", "STY", "TERM_PROGRAM")}
        child = pexpect.spawn(
            sys.executable,
            [RUN_MCP, "--mcp-config", str(config), "-i"],
            cwd=str(tmp_path),
            env={**env, **extra_env},
            encoding="utf-8",
            timeout=120,
            dimensions=(40, 120),
        )
        child.logfile_read = everything = io.StringIO()
        child.sendline("show me the screen")
        child.expect_exact("a picture")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
    return everything.getvalue()


def test_a_real_terminal_that_announces_iterm2_shows_the_picture(tmp_path: Path) -> None:
    shown = _repl_output(tmp_path, {"TERM_PROGRAM": "iTerm.app"})
    assert "image saved:" in shown and "\x1b]1337;File=inline=1;" in shown


def test_a_terminal_that_announces_nothing_gets_the_path_only(tmp_path: Path) -> None:
    shown = _repl_output(tmp_path, {})
    assert "image saved:" in shown and "\x1b]1337" not in shown and "\x1b_G" not in shown
