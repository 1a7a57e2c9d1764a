r"""Rows from a stock Bytewax source into an exactly-once Parquet lane, with `twg.to_batches`.

The source is Bytewax's own ``TestingSource`` (any source works: it emits dicts,
dataclasses or pydantic models one at a time). ``to_batches`` gathers them into Arrow
batches with an explicit schema; ``locator="counter"`` numbers the rows per bucket, so
``ParquetSink`` can skip replays after a resume. Rows that do not fit the schema go to a
dead-letter lane with their JSON text. Run it, then read the lanes back::

    python -m bytewax.run docs.examples.to_batches
    python docs/examples/to_batches.py      # runs the flow, then prints what landed

``THALWEG_LANE`` sets the lake directory (default ``lake/users``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane


class ExampleSettings(Settings):
    """Read from THALWEG_LANE."""

    component = "docs.examples.to_batches"

    lane: str = "lake/users"


@dataclass
class Signup:
    """A row as application code might carry it."""

    user_id: int
    email: str
    plan: str | None


SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("email", pa.string(), nullable=False),
        pa.field("plan", pa.string()),
    ]
)
ROWS = [
    Signup(1, "ada@example.org", "pro"),
    {"user_id": 2, "email": "bo@example.org", "plan": None},
    {"user_id": "three", "email": "cy@example.org", "plan": "free"},  # not an int64
    Signup(4, "di@example.org", None),
]

settings = ExampleSettings.load()
flow = Dataflow("signups")
rows = op.input("signups", flow, TestingSource(ROWS))
out = twg.to_batches("batches", rows, schema=SCHEMA, max_rows=1000, locator="counter")
op.output("lane", out.batches, ParquetSink(Path(settings.lane) / "signups"))
op.output("dlq", out.rejected, ParquetSink(Path(settings.lane) / "dlq"))

if __name__ == "__main__":
    run_main(flow)
    lane = read_lane(Path(settings.lane) / "signups").sort_by("user_id")
    print(lane.select(["user_id", "email", "plan", "_twg_source_offset"]).to_pylist())
    dlq = read_lane(Path(settings.lane) / "dlq")
    print(dlq.column("message").to_pylist())
