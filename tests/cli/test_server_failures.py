"""How a server that fails to start is told (issue 31 #6): its first `Error:` line, not the
tail of the usage text it printed after it; a host that does not resolve is said as such."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.cli import run_cli

USAGE_AFTER_ERROR = """
import sys
print("Error: unknown flag: --bogus", file=sys.stderr)
print("Usage:\\n  server [flags]\\n\\nFlags:", file=sys.stderr)
for i in range(12):
    print(f"  --flag{i}   does thing {i}", file=sys.stderr)
sys.exit(1)
"""


def test_a_failing_server_is_quoted_by_its_first_error_line(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(USAGE_AFTER_ERROR)
    proc = run_cli(
        ["--server-command", f"{sys.executable} {script}", "-p", "hi"],
        tmp_path,
        base_url="http://127.0.0.1:9/v1",
    )
    assert proc.returncode == 1, proc.stderr
    error = next(line for line in proc.stderr.splitlines() if "server 'main'" in line)
    assert "last stderr: Error: unknown flag: --bogus (log:" in error
    assert "--flag" not in error  # the usage text is in the log, not the error


def test_a_host_that_does_not_resolve_is_said_as_such(tmp_path: Path) -> None:
    proc = run_cli(
        ["--server-url", "http://no-such-host.invalid/mcp", "-p", "hi"],
        tmp_path,
        base_url="http://127.0.0.1:9/v1",
    )
    assert proc.returncode == 1, proc.stderr
    assert "the host name does not resolve" in proc.stderr
    assert "connection refused" not in proc.stderr
