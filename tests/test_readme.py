"""The README's Quickstart runs as written, as a new user would type it.

The commands are taken from the README itself, so a change there is tested here. Only
the install steps are left out (the test runs in the installed environment: the temp
working directory's ``.venv`` links to the interpreter's venv), and so is the command
that runs the test suite itself. Everything else — the embedded flow and its tables, the
lane stats, the DuckDB query, the local PostgreSQL and the flow into it, and broker,
produce and flow against Kafka — runs verbatim in a fresh directory, in its own process
group, which is killed at the end whatever happens.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL = re.compile(r"-m venv |pip install ")


def quickstart_commands() -> list[str]:
    """The shell commands of the README's Quickstart, install steps removed."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            if not command.strip() or "-m pytest" in command:
                continue
            steps = [s for s in command.split(" && ") if not INSTALL.search(s)]
            commands.append(" && ".join(steps))
    return commands


def test_the_quickstart_commands_are_all_found() -> None:
    commands = quickstart_commands()
    assert any("thalweg dev broker &" in c for c in commands)
    assert any("thalweg dev postgres &" in c for c in commands)
    assert commands[0].startswith(".venv/bin/thalweg run orders")
    assert not any("PORT" in c for c in commands), "a placeholder the user must replace"


def test_the_quickstart_runs_verbatim(open_dir: Path) -> None:
    tmp_path = open_dir  # every parent traversable: `thalweg dev postgres` run as root widens none
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    script = "set -e\n" + "\n".join(quickstart_commands()) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, (out[-3000:], err[-3000:])
    # The embedded run, its tables, its lane stats and the DuckDB query over its DLQ.
    ice = "(iceberg thalweg-data/warehouse)"
    assert "  raw lane thalweg-data/raw: 20,000 records (+20,000)" in out
    assert "  rejected: 40 (decode 20, dq 20)" in out
    assert f"  table sales.orders {ice}: 19,960 rows (+19,960)" in out
    # The sample is deterministic: docs/flows/orders.md shows these very counts.
    assert f"  table sales.order_lines {ice}: 50,106 rows (+50,106)" in out
    assert "50,106 order lines" in (ROOT / "docs" / "flows" / "orders.md").read_text()
    assert f"  table sales.revenue_per_status_minute {ice}: " in out
    assert "total: 20,000 records" in out
    assert "reason" in out and "decode" in out and "dq" in out
    # `thalweg query`: every order of the table joined to its record in the raw lane.
    assert re.search(r"│ 19960\s+│ 19960\s+│", out), out[-3000:]
    # The local PostgreSQL: the same run fills its tables, the Iceberg ones hold already.
    assert "DSN postgresql://" in out
    assert f"  table sales.orders {ice}: 19,960 rows (+0)" in out
    assert "  table public.orders (postgres): 19,960 rows (+19,960)" in out
    assert "  table public.revenue_per_status_minute (postgres): " in out
    assert not (tmp_path / ".thalweg" / "postgres.dsn").exists(), "the stopped server's DSN"
    assert (tmp_path / ".thalweg" / "postgres").is_dir(), "the server's data is kept"
    # Broker, produce and the same flow on Kafka, into its own lake.
    assert "produced 10,000 sample orders" in out
    assert "  raw lane thalweg-kafka/raw: 10,000 records (+10,000)" in out
    assert not (tmp_path / ".thalweg" / "broker").exists(), "the stopped broker left its address"
