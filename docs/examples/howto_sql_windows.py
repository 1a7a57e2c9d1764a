r"""A ``twg.sql`` transform, then one-minute tumbling windows upserted into an Iceberg table.

Decoded orders (keyed batches with their locator, as ``twg.decode`` emits them) go
through one SQL node that keeps paid orders and converts their amount to euros; the
result lands in an exactly-once Parquet lane and feeds ``twg.window_agg``, whose
per-minute revenue per currency is upserted into ``shop.revenue_per_minute`` by
``(currency, window_start)``. Run it::

    python docs/examples/howto_sql_windows.py [WAREHOUSE_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.records.ids import record_ids_array

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CURRENCIES = ["EUR", "USD"]
STATUSES = ["PAID", "PAID", "PAID", "NEW"]  # every fourth order is not paid yet


def orders(partition: int, first: int, n: int) -> pa.RecordBatch:
    """``n`` orders of one source partition, one every 2 s of event time, with the locator."""
    idx = range(first, first + n)
    offsets = pa.array(idx, pa.int64())
    return pa.RecordBatch.from_pydict(
        {
            "order_id": [f"o-{partition}-{i}" for i in idx],
            "created_at": pa.array(
                [T0 + timedelta(seconds=2 * i) for i in idx], pa.timestamp("ms", tz="UTC")
            ),
            "status": [STATUSES[i % 4] for i in idx],
            "currency": [CURRENCIES[(i // 4) % 2] for i in idx],
            "amount": pa.array([10.0] * n, pa.float64()),
            "_twg_source_topic": ["orders"] * n,
            "_twg_source_partition": pa.array([partition] * n, pa.int32()),
            "_twg_source_offset": offsets,
            "_twg_record_id": record_ids_array(
                None, "orders", partition, offsets, pa.nulls(n, pa.binary())
            ),
        }
    )


# 2 partitions x 5 batches x 30 orders: 300 orders over 5 minutes of event time.
BATCHES = [(f"orders:{p}", orders(p, b * 30, 30)) for b in range(5) for p in range(2)]

QUERY = """
SELECT order_id, created_at, currency,
       amount * CASE currency WHEN 'USD' THEN $usd_rate ELSE 1.0 END AS amount_eur
FROM orders
WHERE status = 'PAID'
"""


def build_flow(work: Path) -> Dataflow:
    """Orders -> SQL -> paid lane; paid -> tumbling windows -> Iceberg upsert."""
    flow = Dataflow("sql_windows")
    batches = op.input("orders", flow, TestingSource(BATCHES))
    paid = twg.sql("paid", batches, QUERY, name="orders", params={"usd_rate": 0.5})
    op.output("paid_lane", paid, ParquetSink(work / "paid"))
    revenue = twg.window_agg(
        "revenue",
        paid,
        window=twg.Tumbling(timedelta(minutes=1)),
        aggs={"revenue_eur": ("sum", "amount_eur"), "orders": ("count", "*")},
        group_by=["currency"],
        time_column="created_at",
        allowed_lateness=timedelta(minutes=5),
    )
    catalog = IcebergCatalogConfig(warehouse=str(work / "warehouse"))
    table = IcebergSink(
        catalog,
        "shop.revenue_per_minute",
        mode="upsert",
        key_columns=["currency", "window_start"],
        locators="absent",  # window rows carry no source offset: upserted by key
    )
    op.output("revenue_table", revenue.windows, table)
    return flow


def main(work: Path) -> None:
    """Run the flow, then print the table."""
    run_main(build_flow(work))
    catalog = IcebergCatalogConfig(warehouse=str(work / "warehouse")).load()
    rows = catalog.load_table("shop.revenue_per_minute").scan().to_arrow()
    rows = rows.sort_by([("window_start", "ascending"), ("currency", "ascending")])
    print(f"{rows.num_rows} windows, {sum(rows.column('orders').to_pylist())} paid orders")
    for row in rows.to_pylist()[:4]:
        start = row["window_start"].strftime("%H:%M")
        print(f"{start} {row['currency']} orders={row['orders']} revenue_eur={row['revenue_eur']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
