r"""Order lines from orders with ``twg.sql``: an ``unnest`` whose rows keep their origin.

Keyed batches of decoded orders (as ``twg.decode`` emits them: payload columns plus the
locator) go through one SQL node that derives one row per order line, into an
exactly-once Parquet lane. Each line keeps its order's topic, partition, offset and
record id, numbered by ``_twg_derived_ordinal``, so the lane skips replays after a
resume like a lane fed by the source. Run it::

    python docs/examples/sql_unnest.py      # runs the flow, then prints what landed

``THALWEG_LANE`` sets the lane directory (default ``lake/order_lines``).
"""

from __future__ import annotations

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.ids import record_ids_array


class ExampleSettings(Settings):
    """Read from THALWEG_LANE."""

    component = "docs.examples.sql_unnest"

    lane: str = "lake/order_lines"


LINE = pa.struct([("sku", pa.string()), ("qty", pa.int32()), ("price_ms", pa.int64())])


def orders(partition: int, first: int, lines: list[list[dict[str, object]]]) -> pa.RecordBatch:
    """A decoded batch of one source partition, as ``twg.decode`` emits it."""
    n = len(lines)
    offsets = pa.array(range(first, first + n), pa.int64())
    ids = record_ids_array(None, "orders", partition, offsets, pa.nulls(n, pa.binary()))
    return pa.RecordBatch.from_pydict(
        {
            "order_id": [f"o-{partition}-{first + i}" for i in range(n)],
            "placed_ms": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
            "lines": pa.array(lines, pa.list_(LINE)),
            "_twg_source_topic": ["orders"] * n,
            "_twg_source_partition": pa.array([partition] * n, pa.int32()),
            "_twg_source_offset": offsets,
            "_twg_record_id": ids,
        }
    )


BATCHES = [
    ("orders:0", orders(0, 0, [[{"sku": "a", "qty": 1, "price_ms": 5}], []])),
    ("orders:1", orders(1, 40, [[{"sku": "b", "qty": 2, "price_ms": 7}] * 2])),
]

QUERY = """
SELECT o.order_id,
       l.line.sku AS sku,
       l.line.qty * l.line.price_ms AS amount,
       millis_to_ts_utc(o.placed_ms) AS placed_at   -- zone in the name: UTC
FROM orders AS o, unnest(o.lines) AS l(line)
WHERE l.line.qty > $min_qty
"""


def build_flow(settings: ExampleSettings) -> Dataflow:
    """Decoded orders -> one row per order line -> an exactly-once Parquet lane."""
    flow = Dataflow("sql_unnest")
    keyed = op.input("orders", flow, TestingSource(BATCHES))
    batches = op.key_on("key", keyed, lambda kv: kv[0])
    values = op.map_value("batch", batches, lambda kv: kv[1])
    lines = twg.sql("lines", values, QUERY, name="orders", params={"min_qty": 0})
    op.output("lane", lines, ParquetSink(settings.lane))
    return flow


flow = build_flow(ExampleSettings.load())

if __name__ == "__main__":
    settings = ExampleSettings.load()
    run_main(flow)
    table = read_lane(settings.lane).sort_by([("_twg_source_offset", "ascending")])
    for row in table.select(
        ["_twg_source_partition", "_twg_source_offset", "_twg_derived_ordinal", "sku", "amount"]
    ).to_pylist():
        print(*row.values())
