r"""A SQL DAG over keyed Arrow batches: a shared node computed once, sinks at interior nodes.

Orders come from a stock Bytewax ``TestingSource``; ``to_batches`` gathers them into Arrow
batches with a counter locator, so every row has a topic, partition and offset. The DAG
(TOML, below) cleans the orders once, then three nodes read the clean rows: big orders,
one row per line item (an ``unnest``), and a per-batch total. ``clean`` and ``lines``
feed exactly-once Parquet lanes (interior and leaf alike); ``totals`` is read from its
stream. Run it, then read the lanes back::

    python -m bytewax.run docs.examples.sql_dag
    python docs/examples/sql_dag.py      # runs the flow, then prints what landed

``THALWEG_LANE`` sets the lake directory (default ``lake/sql_dag``).
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.operators.sql_dag import sql_dag
from thalweg_bytewax.sql import SqlDag


class ExampleSettings(Settings):
    """Read from THALWEG_LANE."""

    component = "docs.examples.sql_dag"

    lane: str = "lake/sql_dag"


DAG = SqlDag.from_toml("""
[[nodes]]
name = "clean"
query = "SELECT * FROM input WHERE amount > 0"
sink = "clean_lane"

[[nodes]]
name = "big"
query = "SELECT order_id, amount FROM clean WHERE amount >= 100"
depends_on = ["clean"]

[[nodes]]
name = "lines"
query = "SELECT order_id, unnest(items) AS item FROM clean"
depends_on = ["clean"]
sink = "lines_lane"

[[nodes]]
name = "totals"
query = "SELECT count(*) AS orders, sum(amount) AS amount FROM clean"
depends_on = ["clean"]
""")

SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("amount", pa.float64(), nullable=False),
        pa.field("items", pa.list_(pa.string())),
    ]
)
ROWS = [
    {"order_id": 1, "amount": 25.0, "items": ["tea"]},
    {"order_id": 2, "amount": -3.0, "items": ["refund"]},  # cleaned away
    {"order_id": 3, "amount": 180.0, "items": ["kettle", "cups"]},
    {"order_id": 4, "amount": 120.0, "items": []},
]

settings = ExampleSettings.load()
lake = Path(settings.lane)
flow = Dataflow("sql_dag")
rows = op.input("orders", flow, TestingSource(ROWS))
batches = twg.to_batches("batches", rows, schema=SCHEMA, max_rows=1000, locator="counter")
sinks = {
    "clean_lane": ParquetSink(lake / "clean"),
    "lines_lane": ParquetSink(lake / "lines"),
}
# The DAG is checked against its input schema when the flow is built: the order columns
# and the locator columns `to_batches` adds.
meta = twg.MetadataColumns()
INPUT = pa.schema([*SCHEMA, *(meta.raw_schema.field(c) for c in meta.locator_columns())])
out = sql_dag("transform", batches.batches, DAG, schema=INPUT, sinks=sinks)
totals: list[tuple[str, pa.RecordBatch]] = []
op.output("totals", out["totals"], TestingSink(totals))

if __name__ == "__main__":
    run_main(flow)
    clean = read_lane(lake / "clean").sort_by("order_id")
    print("clean:", clean.column("order_id").to_pylist())
    lines = read_lane(lake / "lines").sort_by([("order_id", "ascending"), ("item", "ascending")])
    print(
        "lines:", list(zip(lines["order_id"].to_pylist(), lines["item"].to_pylist(), strict=True))
    )
    print("totals:", [b.select(["orders", "amount"]).to_pylist() for _, b in totals])
    print("runs per node:", out.runner.runs)
