"""Windows benchmark: window_agg against Bytewax's per-record fold_window and a DuckDB GROUP BY.

All variants aggregate the same generated orders (event time rising 1 ms per row with
jitter, 8 statuses, an int64 amount) into 1-minute tumbling windows per status:
revenue = sum(amount), orders = count(*), mean = avg(amount).

* ``window_agg`` — ``twg.window_agg`` in a Bytewax flow (``run_main``, one worker) over
  keyed 100k-row batches from a lazy source, results to a counting sink;
* ``window_agg2x`` — the same with twice the rows: peak RSS must stay flat (memory is
  bounded by the open windows, not by the input);
* ``fold_window`` — Bytewax's stock ``bytewax.operators.windowing.fold_window`` per
  record (one Python dict per row, keyed by status, ``EventClock`` + ``TumblingWindower``);
  fewer rows, it is slow;
* ``duckdb`` — a plain DuckDB ``GROUP BY status, time_bucket`` over the whole data at
  once (no streaming, no state, no lateness): the columnar ceiling.

Each variant runs in its own process (its peak RSS is its own). Generation time is
counted in every variant alike (the source builds batches on the fly). rows/CPU-s
divides by the process's user + system CPU time, so it is the one-core rate even where
a library uses a thread pool::

    .venv/bin/python benchmarks/windows.py --rows 4000000 --fold-rows 200000
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import peak_rss_mb, run_child  # noqa: E402

BATCH_ROWS = 100_000
STATUSES = np.array(["NEW", "PAID", "PACKED", "SHIPPED", "DELIVERED", "RETURNED", "LOST", "HELD"])
T0_MS = int(datetime(2024, 5, 1, tzinfo=UTC).timestamp() * 1000)
WINDOW = timedelta(minutes=1)


def batch(i: int) -> pa.RecordBatch:
    """Batch ``i``: rows ``i * BATCH_ROWS`` on, event time 1 ms per row with ±2 s jitter."""
    rng = np.random.default_rng(i)
    first = i * BATCH_ROWS
    ms = T0_MS + np.arange(first, first + BATCH_ROWS) + rng.integers(-2000, 2000, BATCH_ROWS)
    return pa.record_batch(
        {
            "created_at": pa.array(ms, pa.timestamp("ms", tz="UTC")),
            "status": pa.array(STATUSES[rng.integers(0, len(STATUSES), BATCH_ROWS)]),
            "amount": pa.array(rng.integers(1, 10_000, BATCH_ROWS), pa.int64()),
        }
    )


def run_window_agg(rows: int) -> dict[str, float]:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.testing import run_main

    import thalweg_bytewax.operators as twg

    n_batches = rows // BATCH_ROWS

    class Part(StatefulSourcePartition[tuple[str, pa.RecordBatch], int]):
        def __init__(self, at: int) -> None:
            self.at = at

        def next_batch(self) -> list[tuple[str, pa.RecordBatch]]:
            if self.at >= n_batches:
                raise StopIteration
            self.at += 1
            return [("orders:0", batch(self.at - 1))]

        def snapshot(self) -> int:
            return self.at

    class Source(FixedPartitionedSource[tuple[str, pa.RecordBatch], int]):
        def list_parts(self) -> list[str]:
            return ["orders:0"]

        def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> Part:
            return Part(resume_state or 0)

    counted = {"windows": 0}

    class Count(StatelessSinkPartition[Any]):
        def write_batch(self, items: list[Any]) -> None:
            counted["windows"] += sum(b.num_rows for _, b in items)

    class Sink(DynamicSink[Any]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Count:
            return Count()

    flow = Dataflow("bench")
    out = twg.window_agg(
        "w",
        op.input("in", flow, Source()),
        window=twg.Tumbling(WINDOW),
        aggs={"revenue": ("sum", "amount"), "orders": ("count", "*"), "mean": ("avg", "amount")},
        group_by=["status"],
        time_column="created_at",
        allowed_lateness=timedelta(seconds=5),
    )
    op.output("out", out.windows, Sink())
    op.output("late", out.late, Sink())
    start = time.perf_counter()
    run_main(flow)
    secs = time.perf_counter() - start
    return {"rows": n_batches * BATCH_ROWS, "seconds": secs, "windows": counted["windows"]}


def run_fold_window(rows: int) -> dict[str, float]:
    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    def records() -> Iterator[dict[str, Any]]:
        for i in range(rows // BATCH_ROWS):
            yield from batch(i).to_pylist()

    flow = Dataflow("fold")
    up = op.input("in", flow, TestingSource(records(), batch_size=1000))
    keyed = op.key_on("key", up, lambda r: r["status"])
    clock = win.EventClock(
        lambda r: r["created_at"].replace(tzinfo=UTC),
        wait_for_system_duration=timedelta(seconds=5),
    )
    windower = win.TumblingWindower(length=WINDOW, align_to=datetime(2024, 1, 1, tzinfo=UTC))

    def add(acc: list[int], r: dict[str, Any]) -> list[int]:
        acc[0] += r["amount"]
        acc[1] += 1
        return acc

    out = win.fold_window(
        "fold", keyed, clock, windower, lambda: [0, 0], add, lambda a, b: [a[0] + b[0], a[1] + b[1]]
    )
    got: list[Any] = []
    op.output("out", out.down, TestingSink(got))
    start = time.perf_counter()
    run_main(flow)
    secs = time.perf_counter() - start
    return {"rows": rows // BATCH_ROWS * BATCH_ROWS, "seconds": secs, "windows": len(got)}


def run_duckdb(rows: int) -> dict[str, float]:
    import duckdb

    start = time.perf_counter()
    data = pa.Table.from_batches([batch(i) for i in range(rows // BATCH_ROWS)])  # noqa: F841
    con = duckdb.connect()
    out = con.sql(
        "SELECT status, time_bucket(INTERVAL 1 MINUTE, created_at) AS w, sum(amount),"
        " count(*), avg(amount) FROM data GROUP BY ALL"
    ).to_arrow_table()
    secs = time.perf_counter() - start
    return {"rows": data.num_rows, "seconds": secs, "windows": out.num_rows}


VARIANTS = {"window_agg": run_window_agg, "fold_window": run_fold_window, "duckdb": run_duckdb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--fold-rows", type=int, default=200_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, rows = args.child
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        result = VARIANTS[name](int(rows))
        done = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_seconds"] = done.ru_utime + done.ru_stime - cpu.ru_utime - cpu.ru_stime
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return
    plan = [
        ("window_agg", "window_agg", args.rows),
        ("window_agg2x", "window_agg", 2 * args.rows),
        ("fold_window", "fold_window", args.fold_rows),
        ("duckdb", "duckdb", args.rows),
    ]
    head = f"{'variant':<14}{'rows':>10}{'seconds':>9}{'rows/s':>12}{'rows/CPU-s':>12}"
    print(f"{head}{'windows':>9}{'peak RSS MB':>13}")
    for label, name, rows in plan:
        r = run_child(__file__, ["--child", name, str(rows)], name=label)
        print(
            f"{label:<14}{int(r['rows']):>10}{r['seconds']:>9.2f}{r['rows'] / r['seconds']:>12,.0f}"
            f"{r['rows'] / r['cpu_seconds']:>12,.0f}{int(r['windows']):>9}{r['peak_rss_mb']:>13.0f}"
        )


if __name__ == "__main__":
    main()
