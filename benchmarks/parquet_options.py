"""What the lane's Parquet writer options cost: the sink's choice against alternatives.

Runs the raw lane (``KafkaSource -> ParquetSink``) or the decode flow (``KafkaSource ->
twg.decode -> ParquetSink``) once on a local mock broker, reads the files it wrote back
into one table, then writes that table again in 30,000-row row groups (the sink cuts
row groups by bytes, 4 MiB by default; the same cut serves every variant), with the
sink's own options (``column_options``: no dictionary and no statistics
on payload bytes, keys and record ids) and with each alternative below. The variants
run in turns, the order rotating every round, and the figure is the writing thread's
CPU (user + system) per row, min / median over the rounds; "cheaper in" counts the
rounds a variant beat the sink's options. The file size is the Parquet bytes written.

Usage::

    python benchmarks/parquet_options.py --lane raw --rounds 15
    python benchmarks/parquet_options.py --lane decoded --shape plain --rounds 15
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _decode_shapes import SHAPES, shape  # noqa: E402
from _harness import broker  # noqa: E402
from decode_e2e import _produce, _thalweg_flow  # noqa: E402
from raw_lane import _flow as _raw_lane_flow  # noqa: E402

_ROW_GROUP = 30_000


def _written(lane: str, shape_name: str, records: int) -> pa.Table:
    """The rows the flow wrote, read back from its Parquet files as one table."""
    from bytewax.testing import run_main

    from thalweg_bytewax.testing import produce_sample_orders

    root = Path(tempfile.mkdtemp(prefix="twg-bench-pqopt-"))
    out = root
    try:
        with broker("") as bootstrap:
            if lane == "raw":
                produce_sample_orders(
                    bootstrap, "pqopt", records, seed=1, partitions=[0, 1, 2, 3], compression="zstd"
                )
                run_main(_raw_lane_flow(bootstrap, ["pqopt"], 0, out, lowmem=False))
            else:
                shape_ = shape(shape_name)
                topics, _, _ = _produce(
                    bootstrap, shape_, "json", records, int(time.time()), (1,), partitions=4,
                    compression="zstd",
                )
                run_main(_thalweg_flow(shape_, "json", bootstrap, topics[1], out))
                out = root / "orders"
        files = sorted(p for p in out.rglob("*.parquet") if not p.name.startswith("."))
        return pa.concat_tables([pq.read_table(f) for f in files]).combine_chunks()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _leaf_paths(schema: pa.Schema) -> list[str]:
    buf = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buf)
    parquet = pq.ParquetFile(pa.BufferReader(buf.getvalue())).schema
    return [parquet.column(i).path for i in range(len(parquet))]


def _variants(table: pa.Table) -> dict[str, dict[str, Any]]:
    from thalweg_bytewax.connectors._parquet_encoding import column_options

    sink = {"compression": "zstd", **column_options(table)}
    ids = [p for p in _leaf_paths(table.schema) if p.endswith("record_id")]
    per_column = {p: ("none" if p in ids else "zstd") for p in _leaf_paths(table.schema)}
    return {
        "sink's options": sink,
        "no dictionary at all": {**sink, "use_dictionary": False},
        "no statistics": {**sink, "write_statistics": False},
        "record ids uncompressed": {**sink, "compression": per_column},
        "data pages v2": {**sink, "data_page_version": "2.0"},
        "zstd level -1": {**sink, "compression_level": -1},
        "lz4": {**sink, "compression": "lz4"},
        "uncompressed": {**sink, "compression": "none"},
    }


def _write(table: pa.Table, options: dict[str, Any]) -> tuple[float, int]:
    buf = pa.BufferOutputStream()
    start = time.thread_time()
    writer = pq.ParquetWriter(buf, table.schema, **options)
    for offset in range(0, table.num_rows, _ROW_GROUP):
        part = table.slice(offset, _ROW_GROUP)
        writer.write_table(part, row_group_size=part.num_rows)
    writer.close()
    return time.thread_time() - start, buf.getvalue().size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lane", choices=["raw", "decoded"], default="raw")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="plain")
    parser.add_argument("--records", type=int, default=120_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    table = _written(args.lane, args.shape, args.records)
    variants = _variants(table)
    times: dict[str, list[float]] = {name: [] for name in variants}
    sizes: dict[str, int] = {}
    names = list(variants)
    for round_ in range(args.rounds):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            seconds, sizes[name] = _write(table, variants[name])
            times[name].append(seconds / table.num_rows * 1e6)
    base = times["sink's options"]
    what = "raw lane" if args.lane == "raw" else f"decoded {args.shape} JSON orders"
    print(f"{table.num_rows:,} rows of the {what}, {args.rounds} rounds")
    print(f"{'variant':<26}{'us/row min':>11}{'median':>8}{'cheaper in':>12}{'MB':>7}")
    for name, values in times.items():
        wins = sum(a < b for a, b in zip(values, base, strict=True))
        print(
            f"{name:<26}{min(values):>11.3f}{statistics.median(values):>8.3f}"
            f"{f'{wins}/{args.rounds}':>12}{sizes[name] / 1e6:>7.2f}"
        )


if __name__ == "__main__":
    main()
