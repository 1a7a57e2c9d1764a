"""SIGKILL a windowed flow mid-stream, resume it: the upserted window results equal a batch
recomputation of the same data, and the late records are counted once each.

Runs ``tests.recovery.window_crash_flow`` under ``python -m bytewax.run`` with a recovery
directory; the flow kills itself with SIGKILL after partition 0's 20th of 40 batches.
Bytewax emits again the windows that closed after its last snapshot; the sink upserts
by (status, window start), so the final view is what the test compares.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fixtures.crash import CrashHarness
from tests.recovery.window_crash_flow import PARTITIONS, WINDOW, batches

pytestmark = [pytest.mark.slow]


def expected() -> tuple[dict[tuple[str, str], tuple[int, int]], set[tuple[str, str]]]:
    """Batch recomputation: (status, window start) -> (revenue, orders); late records."""
    view: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    late: set[tuple[str, str]] = set()
    size = int(WINDOW.total_seconds())
    for p in range(PARTITIONS):
        for batch, n_late in batches(p):
            for j, r in enumerate(batch.to_pylist()):
                if j < n_late:  # the generator puts the late record first
                    late.add((r["status"], r["created_at"].isoformat()))
                    continue
                t = int(r["created_at"].timestamp())
                start = datetime.fromtimestamp(t // size * size, UTC).isoformat()
                view[(r["status"], start)][0] += r["amount"]
                view[(r["status"], start)][1] += 1
    return {k: (v[0], v[1]) for k, v in view.items()}, late


def read(db: Path) -> tuple[dict[tuple[str, str], tuple[int, int]], list[tuple[str, str, str]]]:
    """The upserted windows, and each late row as (source, status, earliest event time)."""
    with sqlite3.connect(db) as con:
        windows = {(s, w): (r, n) for s, w, r, n in con.execute("SELECT * FROM windows")}
        late = [
            (src, s, t) for s, src, _, t, n in con.execute("SELECT * FROM late") for _ in range(n)
        ]
    return windows, late


def test_window_results_after_sigkill_and_resume_equal_a_batch_recomputation(
    crash: CrashHarness, tmp_path: Path
) -> None:
    db = tmp_path / "windows.db"
    env = {"WINDOW_TEST_DB": str(db), "WINDOW_TEST_KILL": str(tmp_path / "killed")}
    flow = crash.flow("tests.recovery.window_crash_flow:flow", snapshot_s=1, env=env)
    flow.killed_at(None)  # the flow kills itself mid-stream, once (WINDOW_TEST_KILL)
    want, want_late = expected()
    before, _ = read(db)
    assert 0 < len(before) < len(want) // 2, "the kill should fall mid-stream"

    flow.finishes()
    got, late = read(db)
    assert got == want
    assert {(s, t) for _, s, t in late} == want_late
    # Upserted on (status, source, late_seq): each late record once, none repeated.
    assert len(late) == len(set(late)) == sum(n for p in range(PARTITIONS) for _, n in batches(p))
