"""FileSource -> ParquetSink vs pyarrow's own reader -> pq.write_table, same files, same run.

For CSV, NDJSON and Parquet inputs with an explicit (contract) schema, each variant
runs in its own process (so its peak RSS is its own):

* ``baseline``: ``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` /
  ``pq.read_table`` with the schema, then ``pq.write_table`` (zstd);
* ``filesource``: a Bytewax flow ``FileSource(schema=...) -> ParquetSink`` (locator
  metadata columns, record ids), run with ``run_main``;
* ``bare``: ``FileSource(schema=..., metadata="none")`` in a flow whose sink hands
  each batch to one ``pq.ParquetWriter`` (zstd): the same six columns the baseline
  writes, so the difference is reading, not the four metadata columns more (path,
  partition, row index, record id) that ``filesource`` hashes and writes (ParquetSink
  needs them for exactly-once).

Prints rows/s, CPU seconds per row (all threads) and peak RSS per variant, and the
ratios FileSource over pyarrow on wall clock and per CPU second. With ``--repeat N``
the two variants alternate N times and each keeps its median run (the machine is
shared: a single run swings by tens of percent).

    .venv/bin/python benchmarks/files.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
from _harness import peak_rss_mb, run_child  # noqa: E402

SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("quantity", pa.int32()),
        pa.field("status", pa.string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def make_files(root: Path, rows: int) -> None:
    import numpy as np
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "order_id": np.arange(rows, dtype=np.int64),
            "customer": pa.array([f"customer-{i % 5000}" for i in range(rows)]),
            "amount": rng.random(rows) * 500,
            "quantity": rng.integers(1, 20, rows, dtype=np.int32),
            "status": pa.array(["paid", "shipped", "open", "cancelled"] * (rows // 4 + 1))[:rows],
            "created_at": pa.array(
                1_700_000_000_000_000 + np.arange(rows, dtype=np.int64) * 1000,
                pa.timestamp("us", tz="UTC"),
            ),
        },
        schema=SCHEMA,
    )
    pacsv.write_csv(table, root / "orders.csv")
    pq.write_table(table, root / "orders.parquet", row_group_size=65_536)
    with (root / "orders.ndjson").open("w") as f:
        for batch in table.to_batches(50_000):
            for r in batch.to_pylist():
                r["created_at"] = r["created_at"].isoformat()
                f.write(json.dumps(r) + "\n")


def baseline(fmt: str, src: Path, out: Path) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    if fmt == "csv":
        table = pacsv.read_csv(
            src, convert_options=pacsv.ConvertOptions(column_types=SCHEMA, strings_can_be_null=True)
        )
    elif fmt == "ndjson":
        table = pj.read_json(src, parse_options=pj.ParseOptions(explicit_schema=SCHEMA))
    else:
        table = pq.read_table(src, schema=SCHEMA)
    pq.write_table(table, out / "out.parquet", compression="zstd")


def filesource(fmt: str, src: Path, out: Path, metadata: str = "locator") -> None:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import run_main

    from thalweg_bytewax.connectors.files import FileSource, split_rejects
    from thalweg_bytewax.connectors.parquet import ParquetSink

    flow = Dataflow("bench_files")
    source = FileSource(str(src), schema=SCHEMA, metadata=metadata)
    files = split_rejects("split", op.input("in", flow, source))
    if metadata != "none":
        op.output("lane", files.ok, ParquetSink(str(out), shards=1))
        run_main(flow)
        return
    import pyarrow.parquet as pq
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    writer = pq.ParquetWriter(out / "out.parquet", SCHEMA, compression="zstd")

    class Part(StatelessSinkPartition[pa.RecordBatch]):
        def write_batch(self, items: list[pa.RecordBatch]) -> None:
            for batch in items:
                writer.write_batch(batch)

    class Sink(DynamicSink[pa.RecordBatch]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Part:
            return Part()

    op.output("bare", op.map("value", files.ok, lambda kv: kv[1]), Sink())
    run_main(flow)
    writer.close()


def child(variant: str, fmt: str, src: str, rows: int) -> None:
    # Imports outside the clock: bytewax and the connectors take ~2 s to import here,
    # which is start-up, not reading.
    if variant != "baseline":
        import bytewax.operators  # noqa: F401
        import bytewax.testing  # noqa: F401

        import thalweg_bytewax.connectors.files  # noqa: F401
        import thalweg_bytewax.connectors.parquet  # noqa: F401
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet  # noqa: F401

    out = Path(tempfile.mkdtemp(prefix="twg-bench-files-"))
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        if variant == "baseline":
            baseline(fmt, Path(src), out)
        else:
            filesource(fmt, Path(src), out, "none" if variant == "bare" else "locator")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rows": rows, "rss_mb": peak_rss_mb()}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default="csv,ndjson,parquet")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", nargs=4, metavar=("VARIANT", "FORMAT", "SRC", "ROWS"))
    args = parser.parse_args()
    if args.child:
        variant, fmt, src, rows = args.child
        child(variant, fmt, src, int(rows))
        return
    root = Path(tempfile.mkdtemp(prefix="twg-bench-files-src-"))
    try:
        make_files(root, args.rows)
        print(f"rows={args.rows} cpus={os.cpu_count()}")
        print(f"{'format':8} {'variant':11} {'rows/s':>12} {'CPU us/row':>11} {'peak RSS MB':>12}")
        for fmt in args.formats.split(","):
            runs: dict[str, list[dict[str, float]]] = {"baseline": [], "filesource": [], "bare": []}
            for _ in range(args.repeat):
                for variant in runs:
                    src = str(root / f"orders.{fmt}")
                    argv = ["--child", variant, fmt, src, str(args.rows)]
                    runs[variant].append(run_child(__file__, argv, name=variant))
            res = {}
            for variant, got in runs.items():
                r = sorted(got, key=lambda x: x["wall_s"])[len(got) // 2]
                res[variant] = r
                print(
                    f"{fmt:8} {variant:11} {r['rows'] / r['wall_s']:>12,.0f} "
                    f"{r['cpu_s'] / r['rows'] * 1e6:>11.3f} {r['rss_mb']:>12.0f}"
                )
            for variant in ("filesource", "bare"):
                wall = res["baseline"]["wall_s"] / res[variant]["wall_s"]
                cpu = res["baseline"]["cpu_s"] / res[variant]["cpu_s"]
                print(
                    f"{fmt:8} ratio {variant}/pyarrow: {wall:.2f}x wall, "
                    f"{cpu:.2f}x per CPU second"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
