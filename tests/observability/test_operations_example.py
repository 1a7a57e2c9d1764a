"""docs/examples/observability.py runs as written and its endpoints tell the run's story."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_operations_example_serves_health_stats_and_metrics(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/observability.py")],
        env={**env, "THALWEG_DATA_DIR": str(tmp_path / "lake"), "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    lines = out.stdout.splitlines()
    assert "ready: True" in lines
    # Each sink partition by its output step's id and component: the raw, DLQ and audit
    # lanes (16 shards each, of which those that met a source partition registered) and
    # the Iceberg tables.
    sinks = [line for line in lines if line.startswith("sink orders.")]
    assert sinks and all(": ok," in line for line in sinks)
    assert any(line.startswith("sink orders.raw_lane (parquet sink) #") for line in sinks)
    assert any(line.startswith("sink orders.ice_orders (iceberg sink) #") for line in sinks)
    assert "stage orders.decode: 2000 records in the last 30 s" in lines
    assert any(
        line.startswith("thalweg_rejected_records_total{")
        and 'reason="decode"' in line
        and line.endswith(" 2.0")
        for line in lines
    )
