"""Two small Kafka flows for `thalweg check`: one with a raw lane, one without."""

from __future__ import annotations

import tempfile
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink

_LAKE = Path(tempfile.mkdtemp(prefix="twg-gate-"))


def _build(name: str, *, raw_lane: bool) -> Dataflow:
    flow = Dataflow(name)
    raw = op.input("kafka_in", flow, KafkaSource(["localhost:1"], ["orders"]))
    if raw_lane:
        op.output("raw_lane", raw, ParquetSink(_LAKE / name / "raw"))
    kept = op.filter_value("keep", raw, lambda b: b.num_rows > 0)
    op.output("a_lane", kept, ParquetSink(_LAKE / name / "a"))
    op.output("b_lane", kept, ParquetSink(_LAKE / name / "b"))
    return flow


unguarded = _build("unguarded", raw_lane=False)
guarded = _build("guarded", raw_lane=True)
