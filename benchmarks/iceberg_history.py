"""What an Iceberg sink's epoch commit costs as the table's history grows, with and without a bound.

A flow commits a snapshot per table and epoch for as long as it runs. This runs an
``IcebergSink`` partition (a SQL catalog on SQLite, the default warehouse) for
``--epochs`` epochs of ``--rows`` rows over 4 source partitions, in a fresh process per
variant, and prints one JSON line per variant: the wall and CPU time of the epoch's
commit (``snapshot()``) over the first and the last 100 epochs, the snapshots kept, the
manifests of the current snapshot, the size of the last metadata file and of all metadata
files, and the process's RSS at the end. Variants (alternated over ``--repeat``):

* ``unbounded``: ``keep_snapshots=None`` on a table without the created-table
  properties (no manifest merging, old metadata files kept): what a sink did before;
* ``keep-N``: ``keep_snapshots=N`` (the default is 500) on a table as the sink creates
  it (manifests merged, metadata files past 100 versions deleted).

    python benchmarks/iceberg_history.py --epochs 3000 --variants unbounded,keep-500
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import peak_rss_mb, rss_mb  # noqa: E402

PARTITIONS = 4
WINDOW = 100  # epochs averaged at the start and the end


def _batch(partition: int, first: int, rows: int) -> Any:
    import pyarrow as pa

    offsets = list(range(first, first + rows))
    ids = [hashlib.sha256(f"{partition}/{o}".encode()).digest() for o in offsets]
    return pa.RecordBatch.from_pydict(
        {
            "order_id": pa.array([partition * 10**9 + o for o in offsets], pa.int64()),
            "amount": pa.array([o % 1000 / 10 for o in offsets], pa.float64()),
            "_twg_source_topic": pa.array(["orders"] * rows, pa.string()),
            "_twg_source_partition": pa.array([partition] * rows, pa.int32()),
            "_twg_source_offset": pa.array(offsets, pa.int64()),
            "_twg_record_id": pa.array(ids, pa.binary(32)),
        }
    )


def run(home: Path, variant: str, epochs: int, rows: int) -> dict[str, Any]:
    """Run the sink for ``epochs`` epochs in this process; what its commits cost."""
    from thalweg_bytewax.connectors.iceberg import IcebergSink

    keep = None if variant == "unbounded" else int(variant.removeprefix("keep-"))
    sink = IcebergSink(str(home / "warehouse"), "bench.orders", keep_snapshots=keep)
    part = sink.build_part("bench.iceberg", "shard-000", None)
    per = max(rows // PARTITIONS, 1)
    wall: list[float] = []
    cpu: list[float] = []
    for epoch in range(epochs):
        part.write_batch([_batch(p, epoch * per, per) for p in range(PARTITIONS)])
        w0, c0 = time.perf_counter(), time.process_time()
        part.snapshot()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        if epoch == 0 and variant == "unbounded":
            table = sink._shared.reload()  # noqa: SLF001 - the table the sink holds
            assert table is not None
            with table.transaction() as tx:  # a table created without the properties
                tx.remove_properties(
                    "commit.manifest-merge.enabled", "write.metadata.delete-after-commit.enabled"
                )
            sink._shared.reload()  # noqa: SLF001
    table = sink._shared.reload()  # noqa: SLF001
    assert table is not None
    metadata_dir = Path(table.location().removeprefix("file://")) / "metadata"
    metadata_files = list(metadata_dir.glob("*.metadata.json"))
    found = {
        "variant": variant,
        "epochs": epochs,
        "rows_an_epoch": per * PARTITIONS,
        "commit_ms_first": round(sum(wall[:WINDOW]) / len(wall[:WINDOW]) * 1000, 1),
        "commit_ms_last": round(sum(wall[-WINDOW:]) / len(wall[-WINDOW:]) * 1000, 1),
        "commit_cpu_ms_first": round(sum(cpu[:WINDOW]) / len(cpu[:WINDOW]) * 1000, 1),
        "commit_cpu_ms_last": round(sum(cpu[-WINDOW:]) / len(cpu[-WINDOW:]) * 1000, 1),
        "snapshots": len(table.metadata.snapshots),
        "expired": part.stats.snapshots_expired,
        "manifests": len(table.current_snapshot().manifests(table.io)),
        "metadata_kb": os.path.getsize(table.metadata_location.removeprefix("file://")) // 1024,
        "metadata_files": len(metadata_files),
        "metadata_files_mb": round(sum(f.stat().st_size for f in metadata_files) / 2**20, 1),
        "rss_mb_end": round(rss_mb()),
        "peak_rss_mb": round(peak_rss_mb()),
    }
    part.close()
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run each variant in a fresh process, alternating; one JSON line per run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3000, help="epochs (commits) a run")
    p.add_argument("--rows", type=int, default=400, help="rows an epoch, over 4 partitions")
    p.add_argument("--variants", default="unbounded,keep-500", help="comma-separated")
    p.add_argument("--repeat", type=int, default=1, help="runs of each variant, alternated")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        with tempfile.TemporaryDirectory(prefix="iceberg-history-") as home:
            print(json.dumps(run(Path(home), args.child, args.epochs, args.rows)), flush=True)
        return 0
    variants = args.variants.split(",")
    for repeat in range(args.repeat):
        order = variants if repeat % 2 == 0 else variants[::-1]
        for variant in order:
            me = [sys.executable, __file__, "--epochs", str(args.epochs), "--rows", str(args.rows)]
            me += ["--child", variant]
            out = subprocess.run(me, check=True, capture_output=True, text=True)
            print(out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
