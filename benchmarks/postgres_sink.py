"""PostgresSink against the bare loaders a competent user writes, on the same Arrow data.

Variants (each in its own process, so its peak RSS is its own), loading N rows of ten
columns (id, customer, amount, quantity, currency, status, created_at, plus the
locator: topic, partition, offset, record id) into a fresh table of the same shape:

- ``bare-adbc``: ``cursor.adbc_ingest`` per batch, one ``COMMIT`` per epoch;
- ``bare-copy``: psycopg binary ``COPY`` with explicit types and ``write_row``;
- ``sink``: :class:`PostgresSink` partitions fed batch by batch, one snapshot per
  epoch (the provisioning, the coverage rows and the replay checks included);
- ``sink-2x``: the sink on twice the rows, to show peak RSS stays flat.

Run::

    python benchmarks/postgres_sink.py --rows 1000000          # embedded pgserver
    python benchmarks/postgres_sink.py --dsn postgresql://...  # a server of your own

Reported per variant: rows/s, MB/s (Arrow bytes of the input), client CPU s/row
(this process: user + system; the server's CPU is not counted) and peak RSS in MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._harness import peak_rss_mb, run_child  # noqa: E402

BATCH_ROWS = 50_000
EPOCH_BATCHES = 4  # an epoch of 200k rows: ~0.5 s of the sink's throughput
PARTITIONS = 4


def make_batches(rows: int) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Keyed batches of ``orders:<p>``, round-robin over the partitions, in offset order.

    Generated lazily, so the input never sits in memory whole: peak RSS is the loader's.
    """
    from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS as C  # noqa: N811

    rng = np.random.default_rng(7)
    next_offset = [0] * PARTITIONS
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        p = (start // BATCH_ROWS) % PARTITIONS
        offsets = np.arange(next_offset[p], next_offset[p] + n, dtype=np.int64)
        next_offset[p] += n
        ids = np.arange(start, start + n, dtype=np.int64)
        rid = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64).view(np.uint8).reshape(n * 16)
        batch = pa.record_batch(
            {
                "id": ids,
                "customer": pa.array(np.char.add("c-", (ids % 9973).astype(str)).tolist()),
                "amount": rng.random(n) * 1000,
                "quantity": (ids % 17).astype(np.int32),
                "currency": pa.array(["EUR", "USD", "GBP"] * (n // 3) + ["EUR"] * (n % 3)),
                "status": pa.array(
                    ["new", "paid", "shipped", "done"] * (n // 4) + ["new"] * (n % 4)
                ),
                "created_at": pa.array(
                    (1_700_000_000_000_000 + ids * 1000).astype("datetime64[us]")
                ).cast(pa.timestamp("us", tz="UTC")),
                C.source_topic: pa.array(["orders"] * n),
                C.source_partition: pa.array(np.full(n, p, dtype=np.int32)),
                C.source_offset: offsets,
                C.record_id: pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(16), n, [None, pa.py_buffer(rid.tobytes())]
                ),
            }
        )
        yield f"orders:{p}", batch


def _ddl(schema: str) -> str:
    return (
        f'CREATE TABLE "{schema}".orders (id bigint, customer text, amount double precision, '
        "quantity integer, currency text, status text, created_at timestamptz, "
        "_twg_source_topic text, _twg_source_partition integer, _twg_source_offset bigint, "
        "_twg_record_id bytea)"
    )


def child(variant: str, dsn: str, rows: int) -> dict[str, float]:
    """Run one variant in this process; the result as a dict."""
    import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]
    import psycopg

    nbytes = 0

    def batches_counted() -> Iterator[tuple[str, pa.RecordBatch]]:
        nonlocal nbytes
        for key, b in make_batches(rows):
            nbytes += b.nbytes
            yield key, b

    batches = batches_counted()
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        if variant.startswith("bare"):
            conn.execute(_ddl(schema))
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if variant == "bare-adbc":
        with adbc.connect(dsn) as conn, conn.cursor() as cur:
            for i, (_, b) in enumerate(batches):
                data = b.set_column(
                    b.schema.get_field_index("_twg_record_id"),
                    "_twg_record_id",
                    b.column("_twg_record_id").cast(pa.binary()),
                )
                cur.adbc_ingest("orders", data, mode="append", db_schema_name=schema)
                if (i + 1) % EPOCH_BATCHES == 0:
                    conn.commit()
            conn.commit()
    elif variant == "bare-copy":
        types = ["int8", "text", "float8", "int4", "text", "text", "timestamptz", "text",
                 "int4", "int8", "bytea"]  # fmt: skip
        with psycopg.connect(dsn) as conn:
            for i, (_, b) in enumerate(batches):
                with conn.cursor().copy(
                    f'COPY "{schema}".orders FROM STDIN (FORMAT BINARY)'
                ) as copy:
                    copy.set_types(types)
                    for row in zip(*(c.to_pylist() for c in b.columns), strict=True):
                        copy.write_row(row)
                if (i + 1) % EPOCH_BATCHES == 0:
                    conn.commit()
            conn.commit()
    else:
        from thalweg_bytewax.connectors.postgres import PostgresSink

        sink = PostgresSink(dsn, "orders", schema=schema, shards=1)
        part = sink.build_part("bench.pg", "shard-000", None)
        for i, (_, b) in enumerate(batches):
            part.write_batch([b])
            if (i + 1) % EPOCH_BATCHES == 0:
                part.snapshot()
        part.snapshot()
        part.close()
    elapsed = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    with psycopg.connect(dsn, autocommit=True) as conn:
        counted = conn.execute(f'SELECT count(*) FROM "{schema}".orders').fetchone()
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert counted is not None and counted[0] == rows, (counted, rows)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "rows": rows,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "mb_per_s": nbytes / elapsed / 1e6,
        "cpu_s_per_row": cpu / rows,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    """Run every variant and print a table (and JSON with ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dsn", default=os.environ.get("THALWEG_TEST_PG_DSN", ""))
    ap.add_argument("--variants", default="bare-adbc,bare-copy,sink,sink-2x")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("VARIANT", "DSN", "ROWS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        variant, dsn, rows = args.child
        print(json.dumps(child(variant, dsn, int(rows))))
        return
    server = None
    dsn = args.dsn
    if not dsn:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
        server = get_server(tempfile.mkdtemp(prefix="twg-bench-pg-"), cleanup_mode="delete")
        dsn = server.get_uri()
    results = {}
    try:
        for variant in args.variants.split(","):
            rows = args.rows * 2 if variant == "sink-2x" else args.rows
            name = "sink" if variant == "sink-2x" else variant
            results[variant] = run_child(__file__, ["--child", name, dsn, str(rows)], name=variant)
    finally:
        if server is not None:
            server.cleanup()
    header = f"{'variant':<10} {'rows':>9} {'rows/s':>10} {'MB/s':>7} {'CPU µs/row':>11}"
    print(f"{header} {'RSS MB':>7}")
    for variant, r in results.items():
        print(
            f"{variant:<10} {int(r['rows']):>9} {r['rows_per_s']:>10,.0f} {r['mb_per_s']:>7.1f} "
            f"{r['cpu_s_per_row'] * 1e6:>11.2f} {r['peak_rss_mb']:>7.0f}"
        )
    bare = max(
        (r["rows_per_s"] for v, r in results.items() if v.startswith("bare")), default=None
    )
    if bare and "sink" in results:
        print(f"sink / fastest bare loader: {results['sink']['rows_per_s'] / bare:.2f}x")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
