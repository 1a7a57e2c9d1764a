"""Write keyed order batches into a PostgreSQL table, exactly once, then read it back.

Run it: ``python docs/examples/postgres_sink.py postgresql://user:pass@host/db``
(or set ``THALWEG_PG_DSN``). The sink creates ``shop.orders`` and its coverage table
``shop._twg_coverage``; running it again writes nothing new (replays are skipped), and
after ``TRUNCATE shop.orders`` or ``DROP TABLE shop.orders`` it writes the 60 rows again
(the sink finds its table lost what its coverage claims, and refills it).
"""

from __future__ import annotations

import os
import sys

import bytewax.operators as op
import psycopg
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from thalweg_bytewax.connectors.postgres import PostgresSink


def batch(partition: int, first: int, n: int) -> pa.RecordBatch:
    """Decoded orders of one source partition, with the locator columns."""
    offsets = list(range(first, first + n))
    return pa.RecordBatch.from_pydict(
        {
            "order_id": pa.array([partition * 1000 + o for o in offsets], pa.int64()),
            "amount": pa.array([o * 1.5 for o in offsets], pa.float64()),
            "created_at": pa.array(
                [1_700_000_000_000_000 + o * 60_000_000 for o in offsets],
                pa.timestamp("us", tz="UTC"),
            ),
            "_twg_source_topic": pa.array(["orders"] * n),
            "_twg_source_partition": pa.array([partition] * n, pa.int32()),
            "_twg_source_offset": pa.array(offsets, pa.int64()),
        }
    )


def build(dsn: str) -> Dataflow:
    """Two source partitions, three batches each, into ``shop.orders``."""
    items = [(f"orders:{p}", batch(p, b * 10, 10)) for b in range(3) for p in range(2)]
    flow = Dataflow("postgres_example")
    orders = op.input("in", flow, TestingSource(items))
    op.output("pg", orders, PostgresSink(dsn, "orders", schema="shop"))
    return flow


def main() -> None:
    """Run the flow, then print the row count and the first rows."""
    dsn = sys.argv[1] if len(sys.argv) > 1 else os.environ["THALWEG_PG_DSN"]
    run_main(build(dsn))
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT order_id, amount FROM shop.orders ORDER BY order_id")
        data = rows.fetchall()
    print(f"{len(data)} rows; first {data[0]}")


if __name__ == "__main__":
    main()
