"""The two-process command of docs/scaling.md runs as written, and lands every record once.

The block is taken from the page itself, so a change there is tested here. It runs in a
fresh directory with the venv's ``bin`` first on ``PATH`` (``thalweg``, ``python``), in
its own process group, which is killed at the end whatever happens. The only change is
the cluster's two ports: the page's fixed ``2101``/``2102`` become two ports that were
free a moment ago, so a busy port on the machine cannot fail the test.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.lanes import lane_stats, read_lane

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Two processes on one machine"


def scaling_commands() -> str:
    """The bash block of the page's two-process section."""
    text = (ROOT / "docs" / "scaling.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, blocks
    return str(blocks[0])


def free_ports(n: int) -> list[int]:
    """``n`` ports on 127.0.0.1 that were free a moment ago, below the ephemeral range.

    A port the kernel hands out for ``bind(0)`` is an ephemeral one, which the broker's
    and the clients' outgoing connections may take before the worker binds it; then
    the other worker waits for it forever.
    """
    ports: list[int] = []
    rng = random.Random()
    while len(ports) < n:
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


def test_the_block_is_two_processes_of_one_cluster_on_localhost() -> None:
    commands = scaling_commands()
    runs = [line for line in commands.splitlines() if "bytewax.run" in line]
    assert len(runs) == 2
    assert "-i 0 " in runs[0] and "-i 1 " in runs[1]
    assert all('-a "127.0.0.1:2101;127.0.0.1:2102"' in line for line in runs)
    assert "python -m bytewax.recovery recovery" in commands


@pytest.mark.slow
def test_two_processes_run_as_written_and_land_every_record_once(tmp_path: Path) -> None:
    first, second = free_ports(2)
    script = "set -e\n" + scaling_commands().replace("2101", str(first)).replace(
        "2102", str(second)
    )
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    # The page's prerequisite: the checkout's example flows (not installed) importable.
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    # Output to files, not pipes: a background process left behind by a failed step
    # would hold a pipe open, and the test would wait for it instead of failing.
    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    logs.mkdir()
    with (logs / "out").open("w") as stdout, (logs / "err").open("w") as stderr:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=work,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    out, err = (logs / "out").read_text(), (logs / "err").read_text()
    assert proc.returncode == 0, (out[-3000:], err[-3000:])
    assert "produced 10,000 sample orders" in out
    assert "total: 10,000 records" in out
    stats = lane_stats(work / "lake" / "raw")
    assert sorted(stats.column("partition").to_pylist()) == [0, 1, 2, 3], stats
    # Each partition's offsets are contiguous from 0, and no record is held twice.
    assert stats.column("first_offset").to_pylist() == [0, 0, 0, 0], stats
    assert stats.column("missing_offsets").to_pylist() == [0, 0, 0, 0], stats
    assert sum(stats.column("records").to_pylist()) == 10_000, stats
    rows = read_lane(work / "lake" / "raw", ["_twg_source_partition", "_twg_source_offset"])
    assert len(set(zip(*rows.to_pydict().values(), strict=True))) == 10_000
