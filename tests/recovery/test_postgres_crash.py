"""SIGKILL a flow writing PostgreSQL mid-stream, resume it: every record lands exactly once.

The flow (``tests/recovery/postgres_flow.py``) is killed at the epoch-sink fault points
(before the sink's commit, right after it) and inside the sink's transaction (after the
COPY, before ``COMMIT``), under one and two workers; the resumed run must leave the
table holding each source record's id exactly once, compared with the source.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bytewax.recovery import init_db_dir

from tests.connectors.postgres_helpers import record_ids, table_exists
from tests.recovery.postgres_flow import items
from thalweg_bytewax.metadata import DEFAULT_COLUMNS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_flow(
    dsn: str, schema: str, recovery: Path, workers: int, fault: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "THALWEG_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if fault:
        env["THALWEG_FAULT"] = fault
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.recovery.postgres_flow",
            dsn,
            schema,
            str(recovery),
            str(workers),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def source_ids() -> list[bytes]:
    return sorted(
        rid for _, b in items() for rid in b.column(DEFAULT_COLUMNS.record_id).to_pylist()
    )


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "fault",
    ["epoch_sink.before_commit:5", "epoch_sink.after_commit:5", "postgres.before_commit:5"],
)
def test_kill_mid_stream_then_resume_holds_every_record_exactly_once(
    pg_dsn: str, pg_schema: str, tmp_path: Path, workers: int, fault: str
) -> None:
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    crashed = run_flow(pg_dsn, pg_schema, recovery, workers, fault)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    expected = source_ids()
    before = (
        record_ids(pg_dsn, pg_schema, "orders") if table_exists(pg_dsn, pg_schema, "orders") else []
    )
    assert 0 < len(before) < len(expected), "the kill should fall mid-stream"
    assert len(before) == len(set(before))
    resumed = run_flow(pg_dsn, pg_schema, recovery, workers, None)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert record_ids(pg_dsn, pg_schema, "orders") == expected
