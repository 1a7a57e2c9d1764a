"""Iceberg sink benchmark: IcebergSink against a bare ``table.append`` per epoch.

Both variants write the same generated orders (10 payload columns plus the locator
columns) into a fresh SQL catalog on SQLite:

* ``append`` — a competent user's baseline: the table created from the explicit Arrow
  schema, then one ``table.append(epoch)`` per epoch;
* ``sink`` — an ``IcebergSink`` partition: ``write_batch`` of 10k-row batches, one
  ``snapshot()`` (one commit) per epoch, coverage in the summary;
* ``sink2x`` — the sink with twice the epochs, to check that peak RSS stays flat.

Each variant runs in its own process (its peak RSS is its own); batches are generated
per epoch and generation time is not counted. Prints rows/s, MB/s (Arrow bytes),
CPU seconds per row and peak RSS::

    .venv/bin/python benchmarks/iceberg_sink.py --epochs 10 --rows-per-epoch 200000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import peak_rss_mb, run_child  # noqa: E402

BATCH_ROWS = 10_000


def epoch_batches(epoch: int, rows: int) -> Iterator[pa.RecordBatch]:
    """The batches of one epoch: source partition 0, offsets continuing across epochs."""
    rng = np.random.default_rng(epoch)
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        first = epoch * rows + start
        offsets = np.arange(first, first + n, dtype=np.int64)
        seed = hashlib.blake2b(offsets.tobytes(), digest_size=16).digest()
        ids = np.frombuffer(seed * n, dtype=np.uint8).reshape(n, 16).copy()
        ids[:, :8] = offsets.view(np.uint8).reshape(n, 8)
        yield pa.RecordBatch.from_pydict(
            {
                "order_id": pa.array(offsets + 1_000_000),
                "customer_id": pa.array(rng.integers(0, 50_000, n)),
                "amount": pa.array(rng.random(n) * 500),
                "currency": pa.array(np.where(rng.random(n) < 0.8, "EUR", "USD")),
                "status": pa.array(np.where(rng.random(n) < 0.9, "paid", "open")),
                "qty": pa.array(rng.integers(1, 9, n).astype(np.int32)),
                "discount": pa.array(rng.random(n) * 0.2),
                "sku": pa.array([f"sku-{i % 9973}" for i in offsets]),
                "created_at": pa.array(
                    1_700_000_000_000_000 + offsets * 1000, pa.timestamp("us", tz="UTC")
                ),
                "country": pa.array(np.where(rng.random(n) < 0.5, "DE", "FR")),
                "_twg_source_topic": pa.array(["orders"] * n),
                "_twg_source_partition": pa.array(np.zeros(n, dtype=np.int32)),
                "_twg_source_offset": pa.array(offsets),
                "_twg_record_id": pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(16), n, [None, pa.py_buffer(ids.tobytes())]
                ),
            }
        )


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(variant: str, epochs: int, rows: int) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from thalweg_bytewax.connectors.iceberg import IcebergSink

    work = Path(tempfile.mkdtemp(prefix="twg-ice-bench-"))
    elapsed = cpu = 0.0
    nbytes = 0
    if variant == "append":
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}"
        )
        catalog.create_namespace("bench")
        schema = next(epoch_batches(0, BATCH_ROWS)).schema
        table = catalog.create_table("bench.orders", schema=schema)
        for e in range(epochs):
            data = pa.Table.from_batches(list(epoch_batches(e, rows)))
            nbytes += data.nbytes
            t0, c0 = time.perf_counter(), cpu_seconds()
            table.append(data)
            elapsed += time.perf_counter() - t0
            cpu += cpu_seconds() - c0
            del data
    else:
        sink = IcebergSink(str(work), "bench.orders")
        part = sink.build_part("bench.out", "shard-000", None)
        for e in range(epochs):
            for batch in epoch_batches(e, rows):
                nbytes += batch.nbytes
                t0, c0 = time.perf_counter(), cpu_seconds()
                part.write_batch([batch])
                elapsed += time.perf_counter() - t0
                cpu += cpu_seconds() - c0
            t0, c0 = time.perf_counter(), cpu_seconds()
            part.snapshot()
            elapsed += time.perf_counter() - t0
            cpu += cpu_seconds() - c0
        part.close()
    total = epochs * rows
    print(
        json.dumps(
            {
                "rows": total,
                "seconds": elapsed,
                "rows_per_s": total / elapsed,
                "mb_per_s": nbytes / elapsed / 1e6,
                "cpu_us_per_row": cpu / total * 1e6,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rows-per-epoch", type=int, default=200_000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    variants = [
        ("append", args.epochs),
        ("sink", args.epochs),
        ("sink2x", args.epochs * 2),
    ]
    results = {}
    for name, epochs in variants:
        variant = "sink" if name.startswith("sink") else name
        results[name] = run_child(
            __file__, ["--child", variant, str(epochs), str(args.rows_per_epoch)], name=name
        )
        r = results[name]
        print(
            f"{name:8s} {r['rows']:>9,.0f} rows  {r['rows_per_s']:>10,.0f} rows/s  "
            f"{r['mb_per_s']:7.1f} MB/s  {r['cpu_us_per_row']:6.2f} CPU us/row  "
            f"peak RSS {r['peak_rss_mb']:6.0f} MB"
        )
    ratio = results["sink"]["rows_per_s"] / results["append"]["rows_per_s"]
    rss = results["sink2x"]["peak_rss_mb"] / results["sink"]["peak_rss_mb"]
    print(f"sink / bare append: {ratio:.2f}x   peak RSS at 2x input: {rss:.2f}x")


if __name__ == "__main__":
    main()
