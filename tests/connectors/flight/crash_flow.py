"""The flow the Flight sink's kill tests run: deterministic batches into a FlightSink.

``python -m bytewax.run "tests.connectors.flight.crash_flow:build_flow(LOCATION)" -r REC
-s 0 -b 0``: 4 source partitions of 300 rows in batches of 30 (a batch per epoch), into
``FlightSink(LOCATION, "orders", shards=2)``. ``FLIGHT_PACE_S`` sleeps that long per batch
(so a test can kill the server mid-run). ``THALWEG_FAULT`` kills it at a named point.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

from tests.helpers import raw_batch
from thalweg_bytewax.connectors.flight import FlightSink

PARTITIONS = 4
ROWS = 300
BATCH = 30


def items() -> list[tuple[str, pa.RecordBatch]]:
    """Every partition's batches, interleaved."""
    return [
        (f"t:{p}", raw_batch("t", p, range(first, first + BATCH)))
        for first in range(0, ROWS, BATCH)
        for p in range(PARTITIONS)
    ]


def _paced(item: tuple[str, pa.RecordBatch]) -> tuple[str, pa.RecordBatch]:
    time.sleep(float(os.environ.get("FLIGHT_PACE_S", "0")))
    return item


def build_flow(location: str) -> Dataflow:
    """The flow, sending to the table server at ``location``."""
    flow = Dataflow("flight_crash")
    batches = op.map("pace", op.input("in", flow, TestingSource(items())), _paced)
    sink = FlightSink(location, "orders", shards=2, retry_for=timedelta(seconds=60))
    op.output("out", batches, sink)
    return flow
