"""SQL filter + projection over decoded batches: rows/s, the fixed per-batch cost, peak RSS.

Measured on one core, in one run:

* ``SqlNode.run`` (what ``twg.sql`` runs per batch: the prepared query over the batch,
  lineage re-attached) at several batch sizes, with the fixed per-batch cost (the time of a
  1-row batch) and its share of each batch's time;
* baseline: the same filter and projection with ``pyarrow.compute`` per batch;
* baseline: bare DuckDB, the same query once over one big table (no per-batch cost).

Every time is the median time of one batch over ``--repeat`` passes, on the process's
CPU clock by default (``--clock cpu``: what the batch costs its core, not moved by other
work sharing the machine; DuckDB runs the query on the calling thread, so nothing runs
elsewhere) or on the wall clock (``--clock wall``, for an idle machine).

Run: taskset -c 1 python benchmarks/sql.py [--rows 2000000] [--batches 10000,50000,100000]
     [--repeat 3] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.records import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.node import SqlNode

QUERY = (
    "SELECT order_id, customer, amount * 1.2 AS gross, status "
    "FROM input WHERE amount > 50 AND status <> 'CANCELLED'"
)


def decoded(rows: int, first: int = 0) -> pa.RecordBatch:
    rng = np.random.default_rng(first)
    statuses = np.array(["NEW", "PAID", "SHIPPED", "CANCELLED"])
    return pa.RecordBatch.from_pydict(
        {
            C.source_topic: pa.array(["orders"] * rows),
            C.source_partition: pa.array(np.zeros(rows, np.int32)),
            C.source_offset: pa.array(np.arange(first, first + rows, dtype=np.int64)),
            C.record_id: pa.array([b"\0" * 16] * rows, pa.binary(16)),
            "order_id": pa.array(np.arange(first, first + rows).astype(str)),
            "customer": pa.array(rng.integers(0, 10_000, rows).astype(str)),
            "amount": pa.array(rng.uniform(0, 100, rows)),
            "status": pa.array(statuses[rng.integers(0, 4, rows)]),
            "note": pa.array(["some free text of a typical order"] * rows),
        }
    )


def arrow_baseline(batch: pa.RecordBatch) -> pa.RecordBatch:
    keep = pc.and_(pc.greater(batch["amount"], 50), pc.not_equal(batch["status"], "CANCELLED"))
    rows = batch.filter(keep)
    return pa.RecordBatch.from_arrays(
        [
            rows["order_id"],
            rows["customer"],
            pc.multiply(rows["amount"], 1.2),
            rows["status"],
            rows[C.source_topic],
            rows[C.source_partition],
            rows[C.source_offset],
            rows[C.record_id],
        ],
        names=[
            "order_id",
            "customer",
            "gross",
            "status",
            C.source_topic,
            C.source_partition,
            C.source_offset,
            C.record_id,
        ],
    )


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
clock = time.process_time


def per_batch(fn, batches: list[pa.RecordBatch], repeat: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """The median time of one batch over ``repeat`` passes, and the rows one pass returns."""
    fn(batches[0])  # warm up (connection, prepared query)
    times, out = [], 0
    for _ in range(repeat):
        out = 0
        for b in batches:
            start = clock()
            out += fn(b).num_rows
            times.append(clock() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batches", default="10000,50000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    print(f"clock: {args.clock}")
    node = SqlNode("bench", QUERY)
    one = [decoded(1, i) for i in range(500)]
    fixed_ms = per_batch(node.run, one, args.repeat)[0] * 1000
    print(f"fixed per-batch cost (median over 1-row batches): {fixed_ms:.2f} ms")
    for size in (int(s) for s in args.batches.split(",")):
        batches = [decoded(size, i) for i in range(0, args.rows, size)]
        sql_s, kept = per_batch(node.run, batches, args.repeat)
        arrow_s, kept2 = per_batch(arrow_baseline, batches, args.repeat)
        assert kept == kept2, (kept, kept2)
        print(
            f"batch {size:>7}: twg.sql {size / sql_s / 1e6:6.2f} M rows/s "
            f"({sql_s * 1000:.1f} ms/batch, fixed cost {fixed_ms / (sql_s * 1000):5.1%}); "
            f"pyarrow.compute {size / arrow_s / 1e6:6.2f} M rows/s"
        )
    big = pa.Table.from_batches([decoded(args.rows)])
    session = SqlSession(None, threads=1)
    bare, out = float("inf"), session.query({"input": big}, QUERY)
    for _ in range(args.repeat):
        start = clock()
        out = session.query({"input": big}, QUERY)
        bare = min(bare, clock() - start)
    print(
        f"bare DuckDB, one table of {big.num_rows}: {big.num_rows / bare / 1e6:.2f} M rows/s "
        f"({out.num_rows} rows out)"
    )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
