"""RSS of a process resumed against an Iceberg table with a long snapshot history.

An Iceberg sink commits a snapshot per table and epoch, each with thalweg's coverage
properties in its summary, and a resumed process loads the table, reads the coverage
over the whole ancestry, looks up what the table holds of a replayed offset range and
commits again. This builds a table of ``--snapshots`` such commits (a SQL catalog on
SQLite, 200 rows a commit over 4 source partitions), then, in a fresh process, prints
the RSS after each of those steps and the size of the table's metadata file:

    python benchmarks/iceberg_history_rss.py --snapshots 50 500

Compare the columns between the sizes: what grows with the history is what a resumed
process keeps of it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SINK_ID = "orders-sink"
PARTITIONS = 4
ROWS = 200


def _rss_mb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def _catalog(home: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("bench", uri=f"sqlite:///{home}/catalog.db", warehouse=f"file://{home}/wh")


def _rows(schema: Any, first: int, partition: int, rows: int) -> Any:
    import pyarrow as pa

    return pa.table(
        {
            "_twg_source_topic": ["orders"] * rows,
            "_twg_source_partition": [partition] * rows,
            "_twg_source_offset": list(range(first, first + rows)),
            "_twg_record_id": [uuid.uuid4().hex for _ in range(rows)],
            "payload": ["x" * 50] * rows,
        },
        schema=schema,
    )


def build(home: Path, snapshots: int) -> None:
    """A table of ``snapshots`` appends, each with the sink's coverage properties."""
    import pyarrow as pa

    catalog = _catalog(home)
    catalog.create_namespace("s")
    schema = pa.schema(
        [
            ("_twg_source_topic", pa.string()),
            ("_twg_source_partition", pa.int32()),
            ("_twg_source_offset", pa.int64()),
            ("_twg_record_id", pa.string()),
            ("payload", pa.string()),
        ]
    )
    table = catalog.create_table("s.orders", schema)
    for i in range(snapshots):
        first = i // PARTITIONS * ROWS
        props = {"thalweg.commit": uuid.uuid4().hex}
        props |= {
            f"thalweg.coverage.{SINK_ID}/orders:{p}": f"0-{first + ROWS - 1}"
            for p in range(PARTITIONS)
        }
        table.append(_rows(schema, first, i % PARTITIONS, ROWS), snapshot_properties=props)


def probe(home: Path) -> dict[str, Any]:
    """RSS after each step of a resume against the table in ``home``."""
    found: dict[str, Any] = {"start": _rss_mb()}
    from thalweg_bytewax.connectors.iceberg._reads import held_record_ids
    from thalweg_bytewax.connectors.iceberg._summary import read_coverage
    from thalweg_bytewax.records.metadata import MetadataColumns

    found["imports"] = _rss_mb()
    table = _catalog(home).load_table("s.orders")
    found["load_table"] = _rss_mb()
    found["snapshots"] = len(table.metadata.snapshots)
    found["metadata_kb"] = os.path.getsize(table.metadata_location.removeprefix("file://")) // 1024
    read_coverage(table, SINK_ID)
    found["read_coverage"] = _rss_mb()
    held_record_ids(table, MetadataColumns(), "orders:1", 1000, 1500)
    found["held_record_ids"] = _rss_mb()
    schema = table.schema().as_arrow()
    for i in range(10):
        table.append(_rows(schema, 10**9 + i * ROWS, 0, ROWS))
        table = table.refresh()
    found["ten_commits"] = _rss_mb()
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Build a table per size, probe each in a fresh process, print one JSON line each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--snapshots", type=int, nargs="+", default=[50, 500])
    p.add_argument("--child", choices=("build", "probe"), help=argparse.SUPPRESS)
    p.add_argument("--home", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child == "build":
        build(Path(args.home), args.snapshots[0])
        return 0
    if args.child == "probe":
        print(json.dumps(probe(Path(args.home))))
        return 0
    for count in args.snapshots:
        with tempfile.TemporaryDirectory(prefix="iceberg-history-") as home:
            me = [sys.executable, __file__, "--home", home, "--snapshots", str(count)]
            subprocess.run([*me, "--child", "build"], check=True)
            out = subprocess.run(
                [*me, "--child", "probe"], check=True, capture_output=True, text=True
            )
            print(out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
