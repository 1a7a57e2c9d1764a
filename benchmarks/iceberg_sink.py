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

On a shared machine, ``--repeat N`` runs the bare append and the sink N times each,
alternating which runs first, and prints the medians (``--no-2x`` skips ``sink2x``;
``--target-file-bytes`` overrides the sink's)::

    .venv/bin/python benchmarks/iceberg_sink.py --epochs 3 --rows-per-epoch 1000000 \
        --repeat 5 --no-2x

``--interleave`` runs both in one process, an epoch of each back to back (alternating
which goes first), and prints the medians of the per-epoch ratios: on a loaded machine
the steadier comparison (no peak RSS there)::

    .venv/bin/python benchmarks/iceberg_sink.py --epochs 8 --rows-per-epoch 1000000 --interleave
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
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


def child(  # noqa: PLR0915 - two variants measured alike
    variant: str, epochs: int, rows: int, target_file_bytes: int, row_group_bytes: int
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from thalweg_bytewax.connectors.iceberg import IcebergSink
    from thalweg_bytewax.connectors.iceberg.config import DEFAULT_TARGET_FILE_BYTES

    work = Path(tempfile.mkdtemp(prefix="twg-ice-bench-"))
    elapsed = gen_cpu = 0.0
    nbytes = 0

    def generated(e: int) -> Iterator[pa.RecordBatch]:
        # Generation runs on this thread; its CPU is taken out of the process's below.
        nonlocal gen_cpu, nbytes
        batches = epoch_batches(e, rows)
        while True:
            g0 = time.thread_time()
            batch = next(batches, None)
            if batch is not None:
                nbytes += batch.nbytes
            gen_cpu += time.thread_time() - g0
            if batch is None:
                return
            yield batch

    if variant == "append":
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}"
        )
        catalog.create_namespace("bench")
        schema = next(epoch_batches(0, BATCH_ROWS)).schema
        table = catalog.create_table("bench.orders", schema=schema)
        wall0, cpu0 = time.perf_counter(), cpu_seconds()
        for e in range(epochs):
            data = pa.Table.from_batches(list(generated(e)))
            t0 = time.perf_counter()
            table.append(data)
            elapsed += time.perf_counter() - t0
            del data
    else:
        sink = IcebergSink(
            str(work),
            "bench.orders",
            target_file_bytes=target_file_bytes or DEFAULT_TARGET_FILE_BYTES,
            row_group_bytes=row_group_bytes or None,
        )
        part = sink.build_part("bench.out", "shard-000", None)
        wall0, cpu0 = time.perf_counter(), cpu_seconds()
        for e in range(epochs):
            for batch in generated(e):
                t0 = time.perf_counter()
                part.write_batch([batch])
                elapsed += time.perf_counter() - t0
            t0 = time.perf_counter()
            part.snapshot()
            elapsed += time.perf_counter() - t0
        part.close()
    # The whole run's CPU (every thread: pyiceberg's and the sink's workers) but the
    # generation's; the wall time of the run, generation included, beside the time
    # spent in the writes alone.
    cpu = cpu_seconds() - cpu0 - gen_cpu
    end_to_end = time.perf_counter() - wall0
    total = epochs * rows
    print(
        json.dumps(
            {
                "rows": total,
                "seconds": elapsed,
                "rows_per_s": total / elapsed,
                "e2e_rows_per_s": total / end_to_end,
                "mb_per_s": nbytes / elapsed / 1e6,
                "cpu_us_per_row": cpu / total * 1e6,
                "cpu_s": cpu,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    )


def _line(name: str, r: dict[str, float]) -> str:
    return (
        f"{name:8s} {r['rows']:>9,.0f} rows  {r['rows_per_s']:>10,.0f} rows/s  "
        f"{r['mb_per_s']:7.1f} MB/s  {r['cpu_us_per_row']:6.2f} CPU us/row  "
        f"with generation {r['e2e_rows_per_s']:>9,.0f} rows/s  "
        f"peak RSS {r['peak_rss_mb']:6.0f} MB"
    )


def interleaved(epochs: int, rows: int) -> None:
    """Both variants in one process, epoch by epoch, alternating which goes first.

    On a loaded machine two processes run under different load; here each epoch's
    pair runs back to back, so the per-epoch CPU ratio is the steadier figure. The
    first epoch of each (table creation, imports) is not counted.
    """
    from pyiceberg.catalog.sql import SqlCatalog

    from thalweg_bytewax.connectors.iceberg import IcebergSink

    work = Path(tempfile.mkdtemp(prefix="twg-ice-bench-"))
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.orders", schema=next(epoch_batches(0, BATCH_ROWS)).schema)
    part = IcebergSink(str(work / "sink"), "bench.orders").build_part(
        "bench.out", "shard-000", None
    )

    def append(batches: list[pa.RecordBatch]) -> tuple[float, float]:
        data = pa.Table.from_batches(batches)
        t0, c0 = time.perf_counter(), cpu_seconds()
        table.append(data)
        return time.perf_counter() - t0, cpu_seconds() - c0

    def sink(batches: list[pa.RecordBatch]) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), cpu_seconds()
        for batch in batches:
            part.write_batch([batch])
        part.snapshot()
        return time.perf_counter() - t0, cpu_seconds() - c0

    walls, cpus = [], []
    for e in range(epochs + 1):
        batches = list(epoch_batches(e, rows))
        if e % 2:
            s, a = sink(batches), append(batches)
        else:
            a, s = append(batches), sink(batches)
        if e:
            walls.append(a[0] / s[0])
            cpus.append(s[1] / a[1])
            print(
                f"epoch {e}: CPU us/row append {a[1] / rows * 1e6:.2f} sink "
                f"{s[1] / rows * 1e6:.2f} ({cpus[-1]:.2f}x); sink / append rows/s {walls[-1]:.2f}x"
            )
    part.close()
    print(
        f"interleaved, {epochs} epochs of {rows:,} rows: sink / bare append rows/s median "
        f"{statistics.median(walls):.2f}x, CPU per record median {statistics.median(cpus):.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rows-per-epoch", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1, help="A/B pairs, alternating order")
    parser.add_argument("--no-2x", dest="twice", action="store_false", help="skip sink2x")
    parser.add_argument("--target-file-bytes", type=int, default=0, help="0: the default")
    parser.add_argument("--row-group-bytes", type=int, default=0, help="0: the default")
    parser.add_argument(
        "--interleave", action="store_true", help="both variants in one process, epoch by epoch"
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, epochs, rows, target, row_group = args.child
        child(variant, int(epochs), int(rows), int(target), int(row_group))
        return
    if args.interleave:
        print(f"load average: {os.getloadavg()[0]:.1f} at start")
        interleaved(args.epochs, args.rows_per_epoch)
        print(f"load average: {os.getloadavg()[0]:.1f} at the end")
        return
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {"append": [], "sink": []}
    for i in range(args.repeat):
        order = ["append", "sink"] if i % 2 == 0 else ["sink", "append"]
        for name in order:
            r = run_child(
                __file__,
                ["--child", name, str(args.epochs), str(args.rows_per_epoch),
                 str(args.target_file_bytes), str(args.row_group_bytes)],
                name=name,
            )  # fmt: skip
            runs[name].append(r)
            print(_line(name, r))
    if args.twice:
        r = run_child(
            __file__,
            ["--child", "sink", str(args.epochs * 2), str(args.rows_per_epoch),
             str(args.target_file_bytes), str(args.row_group_bytes)],
            name="sink2x",
        )  # fmt: skip
        print(_line("sink2x", r))
        rss = r["peak_rss_mb"] / statistics.median(x["peak_rss_mb"] for x in runs["sink"])
        print(f"peak RSS at 2x input: {rss:.2f}x")
    pairs = list(zip(runs["append"], runs["sink"], strict=True))
    ratios = [s["rows_per_s"] / a["rows_per_s"] for a, s in pairs]
    e2e = [s["e2e_rows_per_s"] / a["e2e_rows_per_s"] for a, s in pairs]
    cpu_ratios = [s["cpu_us_per_row"] / a["cpu_us_per_row"] for a, s in pairs]
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in runs.items()}
    for name, r in med.items():
        print(f"median {_line(name, r)}  CPU {r['cpu_s'] / r['rows'] * 1e6:.2f} us/record")
    print(
        f"sink / bare append: median of pairs {statistics.median(ratios):.2f}x "
        f"(pairs {', '.join(f'{x:.2f}' for x in ratios)}); CPU per record "
        f"{med['sink']['cpu_s'] / med['append']['cpu_s']:.2f}x the bare append's "
        f"(median of pairs {statistics.median(cpu_ratios):.2f}x: "
        f"{', '.join(f'{x:.2f}' for x in cpu_ratios)})"
    )
    print(
        f"with generation (the run's wall time): median of pairs {statistics.median(e2e):.2f}x "
        f"(pairs {', '.join(f'{x:.2f}' for x in e2e)})"
    )
    print(f"load average: {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
