r"""Revenue per status per minute with `twg.window_agg`, late orders reported on the side.

Orders arrive as keyed Arrow batches (key = source partition, as every thalweg source
emits them). ``window_agg`` sums them into one-minute tumbling windows per status on
their event time; an order that arrives after its window closed goes to the ``late``
stream with a count. Run it::

    python -m bytewax.run docs.examples.windows
    python docs/examples/windows.py      # runs the flow and prints the results
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def orders(seconds: list[int], status: list[str], amount: list[int]) -> pa.RecordBatch:
    """A batch of orders created ``seconds`` after noon."""
    return pa.record_batch(
        {
            "created_at": pa.array(
                [T0 + timedelta(seconds=s) for s in seconds], pa.timestamp("ms", tz="UTC")
            ),
            "status": status,
            "amount": pa.array(amount, pa.int64()),
        }
    )


BATCHES = [
    ("orders:0", orders([5, 20, 50], ["PAID", "NEW", "PAID"], [30, 10, 20])),
    ("orders:0", orders([70, 95], ["PAID", "PAID"], [5, 7])),
    ("orders:0", orders([10, 130], ["PAID", "PAID"], [99, 1])),  # 10 s: after 12:00 closed
]

flow = Dataflow("revenue_per_minute")
batches = op.input("orders", flow, TestingSource(BATCHES))
out = twg.window_agg(
    "revenue",
    batches,
    window=twg.Tumbling(timedelta(minutes=1)),
    aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
    group_by=["status"],
    time_column="created_at",
    allowed_lateness=timedelta(seconds=15),
)
windows: list[tuple[str, pa.RecordBatch]] = []
late: list[tuple[str, pa.RecordBatch]] = []
op.output("windows", out.windows, TestingSink(windows))
op.output("late", out.late, TestingSink(late))


if __name__ == "__main__":
    run_main(flow)
    for _, batch in windows:
        for row in batch.to_pylist():
            start = row["window_start"].strftime("%H:%M")
            print(f"{row['status']} {start} revenue={row['revenue']} orders={row['orders']}")
    print(f"late: {out.stats.late_records}")
