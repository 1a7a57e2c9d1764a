"""FlightSink under SIGKILL: of the flow at each fault point, and of the server mid-run.

After every kill the flow resumes from its recovery store; at the end the server holds
each source row exactly once, with nothing lost.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.connectors.flight.crash_flow import PARTITIONS, ROWS
from tests.fixtures.crash import ROOT, CrashHarness
from tests.helpers import closed_port, located
from thalweg_bytewax.flight.table_server import read_held

pytestmark = pytest.mark.slow

WAIT_S = 60.0


class ServerProcess:
    """A TableServer in its own process, on a fixed port, that can be SIGKILLed and restarted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = closed_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def location(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "tests.connectors.flight.serve_table",
            str(self.root),
            str(self.port),
        ]
        self.proc = subprocess.Popen(argv, cwd=ROOT)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT_S)

    def held(self) -> pa.Table:
        tables = [read_held(self.root, "orders", "t", p) for p in range(PARTITIONS)]
        return pa.concat_tables([t for t in tables if t is not None])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "server")
    proc.start()
    try:
        yield proc
    finally:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.kill()


EVERY_ROW = sorted((p, o) for p in range(PARTITIONS) for o in range(ROWS))


@pytest.mark.parametrize(
    ("faults", "workers"),
    [
        (["flight.after_send:3", "flight.after_confirm:2", "epoch_sink.after_commit:4"], 1),
        (["epoch_sink.mid_write:5", "epoch_sink.before_commit:3"], 1),
        (["flight.after_confirm:3", "epoch_sink.after_commit:2"], 2),
    ],
    ids=["flight-points", "epoch-points", "two-workers"],
)
def test_a_flow_killed_at_each_point_lands_every_row_once(
    crash: CrashHarness, server: ServerProcess, faults: list[str], workers: int
) -> None:
    spec = f"tests.connectors.flight.crash_flow:build_flow({server.location!r})"
    flow = crash.flow(spec, "-w", str(workers))
    for fault in faults:
        flow.killed_at(fault)
        rows = located(server.held())
        assert len(rows) == len(set(rows)), fault  # nothing twice, even mid-run
    flow.finishes()
    assert sorted(located(server.held())) == EVERY_ROW


def test_a_server_killed_mid_run_and_restarted_loses_and_repeats_nothing(
    crash: CrashHarness, server: ServerProcess
) -> None:
    flow = crash.flow(
        f"tests.connectors.flight.crash_flow:build_flow({server.location!r})",
        env={"FLIGHT_PACE_S": "0.05"},
    )
    proc = flow.start()
    crash.wait_until(
        lambda: any(server.root.rglob("*.arrows")),
        proc,
        timeout_s=WAIT_S,
        what="some rows confirmed",
        poll_s=0.02,
    )
    server.kill()
    time.sleep(0.3)  # the flow's stream breaks while the server is away
    server.start()
    crash.finish(proc, timeout_s=WAIT_S * 2)
    assert sorted(located(server.held())) == EVERY_ROW
