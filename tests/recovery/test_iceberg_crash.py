"""Kill a flow writing an Iceberg table mid-stream, resume it: every record lands once.

The flow (``main`` below, run as ``python -m tests.recovery.test_iceberg_crash``) feeds
keyed batches of three source partitions through ``IcebergSink`` with recovery and an
epoch per batch. It is SIGKILLed at the epoch-sink fault points (between the writes and
the commit, and right after the commit, before the recovery store records the epoch)
and at the sink's own point after the Iceberg commit, then resumed. The table is
compared by record id against the source. With two workers and two shards, two sink
partitions commit to the one table concurrently (lost races are retried).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, cluster_main

from tests.connectors.test_iceberg_sink import orders
from tests.fixtures.iceberg import read_iceberg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS, BATCHES, PER_BATCH = 3, 12, 50


def items() -> list[tuple[str, pa.RecordBatch]]:
    return [
        (f"orders:{p}", orders(p, list(range(b * PER_BATCH, (b + 1) * PER_BATCH))))
        for b in range(BATCHES)
        for p in range(PARTITIONS)
    ]


def expected_ids() -> set[bytes]:
    return {rid for _, batch in items() for rid in batch.column("_twg_record_id").to_pylist()}


def main() -> None:
    """``main WAREHOUSE RECOVERY WORKERS``: run the flow to the end (or to a fault)."""
    warehouse, recovery, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    flow = Dataflow("iceberg_crash")
    up = op.input("in", flow, TestingSource(items()))
    op.output("out", up, IcebergSink(warehouse, "test.orders", shards=workers))
    cluster_main(
        flow,
        addresses=[],
        proc_id=0,
        epoch_interval=timedelta(0),
        recovery_config=RecoveryConfig(recovery),
        worker_count_per_proc=workers,
    )


def run_flow(
    warehouse: Path, recovery: Path, workers: int, fault: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "THALWEG_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if fault:
        env["THALWEG_FAULT"] = fault
    cmd = [sys.executable, "-m", "tests.recovery.test_iceberg_crash"]
    return subprocess.run(
        [*cmd, str(warehouse), str(recovery), str(workers)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def record_ids(warehouse: Path) -> list[bytes]:
    table = read_iceberg(IcebergCatalogConfig(warehouse=str(warehouse)))
    if table.num_rows == 0:
        return []
    ids: list[bytes] = table.column("_twg_record_id").to_pylist()
    return ids


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "fault", ["epoch_sink.before_commit:5", "epoch_sink.after_commit:5", "iceberg.after_commit:4"]
)
def test_kill_mid_stream_then_resume_lands_every_record_once(
    tmp_path: Path, workers: int, fault: str
) -> None:
    warehouse, recovery = tmp_path / "warehouse", tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    crashed = run_flow(warehouse, recovery, workers, fault)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    before = record_ids(warehouse)
    expected = expected_ids()
    assert 0 < len(before) < len(expected), "the kill should fall mid-stream"
    resumed = run_flow(warehouse, recovery, workers, None)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = record_ids(warehouse)
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} records landed twice"
    assert set(got) == expected, f"{len(expected - set(got))} records lost"


if __name__ == "__main__":
    main()
