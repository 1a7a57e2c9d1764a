"""Write keyed order batches into a local Iceberg table, exactly once, then read it back.

Run it: ``python docs/examples/iceberg_sink.py [WAREHOUSE]`` (default ``lake/warehouse``).
No service is needed: the catalog is SQLite under the warehouse directory.
"""

from __future__ import annotations

import sys

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSink


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


def main(warehouse: str = "lake/warehouse") -> pa.Table:
    """Run the flow and return the table's rows."""
    catalog = IcebergCatalogConfig(warehouse=warehouse)  # type="rest", uri=..., token=...
    items = [(f"orders:{p}", batch(p, b * 10, 10)) for b in range(3) for p in range(2)]
    flow = Dataflow("iceberg_example")
    orders = op.input("orders", flow, TestingSource(items))
    op.output(
        "iceberg",
        orders,
        IcebergSink(catalog, "shop.orders", partition_by=["day(created_at)"]),
    )
    run_main(flow)
    return catalog.load().load_table("shop.orders").scan().to_arrow()


if __name__ == "__main__":
    table = main(*sys.argv[1:])
    print(table.num_rows, "rows;", table.schema.names)
