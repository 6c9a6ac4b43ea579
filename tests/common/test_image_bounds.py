"""Images are bounded (issue 19 item 7) and reach the user (issue 22 item 7): a real MCP
server returns a 20 MB image three times and 500 images once; the requests the scripted
model receives, the transcript and the agent's memory stay under agent.common.images' bounds, and
every image is saved in the session's folder, its path in the trace and the JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.common.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES_PER_RESULT,
    MAX_REQUEST_IMAGE_BYTES,
    MAX_REQUEST_IMAGES,
    MAX_SAVED_PER_RESULT,
    bound_images,
    decoded_size,
    part_data,
)
from agent.common.memory import Memory
from agent.common.transcript import Transcript, load
from agent.loop.vision import image_message
from agent.tools.results import Image
from tests.support.cli import cli_env, mcp_json
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

IMAGE_SERVER = SUPPORT / "image_server.py"
MB = 1024 * 1024
# What a request may weigh: the image data bound in base64, plus room for the text.
REQUEST_BOUND = MAX_REQUEST_IMAGE_BYTES * 4 // 3 + 1 * MB
RSS_BOUND_KB = 300 * 1024
# Runs the agent's own `main` and notes its peak RSS (the entry point ends with os._exit).
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec from the process
# that spawned us, so under pytest-xdist it read the worker's own peak (336 MB once), not ours.
MEASURED = """
import os, re, sys
from agent.cli.main import main
code = main(sys.argv[2:])
with open("/proc/self/status") as status, open(sys.argv[1], "w") as fh:
    fh.write(re.search(r"VmHWM:\\s*(\\d+) kB", status.read()).group(1))
os._exit(code)
"""


def image_parts(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        found
        for message in request["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if (found := part_data(part)) is not None
    ]


@pytest.mark.slow
def test_a_20_mb_image_three_times_and_500_images_stay_within_the_bounds(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": [str(IMAGE_SERVER)], "tool_timeout": 120}
    config = mcp_json(tmp_path, {"img": server})
    # Three calls (labelled: an identical read just repeated is not run again).
    script = [tool_calls(("img__screenshot", {"label": str(n)})) for n in range(3)]
    script += [tool_calls(("img__contact_sheet", {})), text("seen them all")]
    rss_file = tmp_path / "rss"
    args = ["--mcp-config", str(config), "--output", "json", "-p", "show me the screen"]
    with ScriptedLLM(*script) as llm:
        proc = subprocess.run(
            [sys.executable, "-c", MEASURED, str(rss_file), *args],
            cwd=tmp_path,
            env=cli_env(tmp_path, llm.base_url, "sk-test"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        requests, sizes = llm.requests, llm.request_bytes
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "answered" and len(requests) == 5

    # The model's side: no request over the bound; the 20 MB image is never sent, and of
    # the 500 only the first MAX_IMAGES_PER_RESULT are.
    assert max(sizes) < REQUEST_BOUND, sizes
    assert max(sizes) < 1 * MB, sizes  # here: 8 small images at most
    assert [len(image_parts(r)) for r in requests] == [0, 0, 0, 0, MAX_IMAGES_PER_RESULT]
    assert (
        sum(decoded_size(data) for _, data in image_parts(requests[4])) <= MAX_REQUEST_IMAGE_BYTES
    )
    screen = requests[1]["messages"][-1]["content"]
    assert "[image image/png, 20.0 MB: not shown to the model, over its 4.0 MB limit" in screen
    sheet = requests[4]["messages"][-2]["content"]
    assert f"[{500 - MAX_IMAGES_PER_RESULT} more image(s) not shown to the model" in sheet

    # The user's side: every image saved (the same one once), its path in JSON and trace.
    calls = result["tool_calls"]
    shots = [c["images"] for c in calls[:3]]
    assert all(len(s) == 1 and s[0]["mime"] == "image/png" for s in shots)
    assert shots[0][0]["bytes"] > 20 * MB and shots[0] == shots[1] == shots[2]
    saved = Path(shots[0][0]["path"])
    assert saved.stat().st_size == shots[0][0]["bytes"] and saved.read_bytes()[:4] == b"\x89PNG"
    assert len(calls[3]["images"]) == MAX_SAVED_PER_RESULT
    assert all(Path(i["path"]).is_file() for i in calls[3]["images"])
    assert f"image saved: {saved}" in proc.stderr
    assert f"more images in {saved.parent}" in proc.stderr

    # The transcript names the files: it holds no image data.
    (transcript,) = (tmp_path / "state" / "sessions").glob("*.jsonl")
    assert transcript.stat().st_size < 1 * MB
    assert "base64" not in transcript.read_text()
    assert saved.parent == transcript.with_suffix("") / "images"

    peak_kb = int(rss_file.read_text())
    assert peak_kb < RSS_BOUND_KB, f"peak RSS {peak_kb / 1024:.0f} MB"


def _png(index: int, size: int) -> str:
    import base64

    raw = b"\x89PNG\r\n\x1a\n" + index.to_bytes(4, "big") + b"\0" * (size - 12)
    return base64.b64encode(raw).decode("ascii")


def _step(memory: Memory, n: int, images: list[Image]) -> None:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    memory.add_assistant("", [call])
    memory.add_tool_result(f"c{n}", "[images]")
    message = image_message([("srv", image) for image in images])
    assert message is not None
    memory.add_images(message)


def test_the_history_keeps_image_data_only_for_the_newest_within_the_request_bounds() -> None:
    memory = Memory()
    memory.add_user("look")
    three_mb = 3 * MB
    for n in range(5):  # 5 steps of one 3 MB image: only the newest two fit 8 MB
        _step(memory, n, [Image("image/png", _png(n, three_mb))])
    kept = [
        found
        for m in memory.messages
        for p in m.get("content") or []
        if isinstance(m.get("content"), list) and (found := part_data(p))
    ]
    assert len(kept) == 2
    assert sum(decoded_size(d) for _, d in kept) <= MAX_REQUEST_IMAGE_BYTES
    notes = json.dumps(memory.messages).count("image not sent again")
    assert notes == 3
    for n in range(30):  # many small ones: the count bound
        _step(memory, 10 + n, [Image("image/png", _png(100 + n, 1024))])
    request = {"messages": memory.fit(1_000_000).messages}
    assert len(image_parts(request)) == MAX_REQUEST_IMAGES


def test_bound_images_leaves_messages_within_the_bounds_untouched() -> None:
    message = image_message([("srv", Image("image/png", _png(1, 1024)))])
    assert message is not None
    messages = [{"role": "user", "content": "hi"}, message]
    bounded = bound_images(messages)
    assert bounded[1] is message and bounded[0] is messages[0]
    assert MAX_IMAGE_BYTES < MAX_REQUEST_IMAGE_BYTES  # one image always fits a request


def test_a_resumed_session_reads_back_only_the_newest_images_from_their_files(
    tmp_path: Path,
) -> None:
    transcript = Transcript.create(tmp_path, {})
    memory = Memory(sink=transcript.append)
    memory.add_user("look")
    for n in range(25):
        _step(memory, n, [Image("image/png", _png(n, 2048))])
    transcript.close()
    assert "base64" not in transcript.path.read_text()
    assert len(list(transcript.images.folder.glob("*.png"))) == 25
    resumed = load(transcript.path)
    request = {"messages": resumed.messages}
    parts = image_parts(request)
    assert len(parts) == MAX_REQUEST_IMAGES
    assert parts[-1][1] == _png(24, 2048)  # the newest, byte for byte
