"""A decode flow's process loads no module it does not use.

pyarrow.dataset (with Acero, Substrait and the CSV and JSON readers it brings, ~7 MB
of RSS) serves the lane readers, not a flow that decodes and writes Parquet lanes: the
DLQ format every operator imports and a new lane's first write must not load it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_FLOW = """
import sys
import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators  # noqa: F401
from thalweg_bytewax.connectors.kafka import KafkaSource  # noqa: F401
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.records.batches import raw_batch_from_records
from thalweg_bytewax.records.model import Locator, RawRecord

batch = raw_batch_from_records([RawRecord(Locator("t", 0, o, "c"), b"k", b"v") for o in range(5)])
flow = Dataflow("footprint")
op.output("out", op.input("in", flow, TestingSource([("t:0", batch)])), ParquetSink(sys.argv[1]))
run_main(flow)
print(sorted(m for m in sys.modules if m.startswith(("pyarrow.dataset", "pyarrow._acero"))))
"""


@pytest.mark.slow
def test_a_flow_writing_a_new_parquet_lane_does_not_load_pyarrow_dataset(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _FLOW, str(tmp_path / "lane")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert list((tmp_path / "lane").rglob("*.parquet"))  # the flow did write
