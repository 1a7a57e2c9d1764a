r"""A sink of your own on the epoch protocol: CSV files per source partition, exactly once.

``CsvSink`` implements four hooks of ``EpochSinkPartition`` and inherits the rest:
``open_partition`` says which offsets the directory already holds (from file names),
``stage`` buffers rows in memory, ``commit_epoch`` writes each partition's rows to a hidden
file, fsyncs it and publishes it under its offset span, and ``held_record_ids`` reads rows
back so the base can check a replay is the same record. The base refuses rows without a
locator, skips the offsets a resumed run already committed, and calls ``commit_epoch`` at
each epoch's snapshot, before Bytewax stores the source position. Run it with recovery::

    python docs/examples/howto_custom_sink.py OUT_DIR RECOVERY_DIR

Kill it anywhere (``THALWEG_FAULT=epoch_sink.after_commit:3`` kills it right after the
third commit) and run it again: every row is in ``OUT_DIR`` once.
"""

from __future__ import annotations

import csv
import os
import re
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig
from bytewax.testing import TestingSource, run_main
from typing_extensions import override

from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.records.batches import raw_batch_from_columns
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition, EpochSinkState
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink

PUBLISHED = re.compile(r"^(\d+)-(\d+)\.csv$")  # <first offset>-<last offset>.csv


class CsvSink(ShardedEpochSink["CsvPartition"]):
    """Offset, record id and value of each row, as CSV under ``<root>/<topic>/<partition>/``."""

    def __init__(self, root: str | os.PathLike[str], *, shards: int = 1) -> None:
        """Write under ``root``, with ``shards`` sink partitions."""
        self.root = Path(root)
        self.shards = shards
        self.columns = MetadataColumns(DEFAULT_PREFIX)

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> CsvPartition:
        return CsvPartition(self, shard, resume_state)


class CsvPartition(EpochSinkPartition):
    """One shard: rows buffered during the epoch, published at its snapshot."""

    def __init__(self, sink: CsvSink, shard: int, resume: EpochSinkState | None) -> None:
        """Resume from ``resume`` (the next offset per source partition), if any."""
        super().__init__(
            component="csv sink",
            columns=sink.columns,
            resume_state=resume,
            shard=shard,
            shards=sink.shards,
        )
        self.sink = sink
        self.dirs: dict[str, Path] = {}
        self.staged: dict[str, list[pa.RecordBatch]] = {}

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        directory = self.sink.root / topic / str(partition)
        directory.mkdir(parents=True, exist_ok=True)
        self.dirs[key] = directory
        spans = []
        for path in directory.iterdir():
            if m := PUBLISHED.match(path.name):
                spans.append((int(m.group(1)), int(m.group(2))))
            elif path.name.startswith(".tmp-"):
                path.unlink()  # an epoch that never committed
        return OffsetCoverage(spans)

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        self.staged.setdefault(key, []).append(rows)  # no I/O: pipelined

    @override
    def commit_epoch(self) -> None:
        cols = self.columns
        for key, batches in self.staged.items():
            table = pa.Table.from_batches(batches)
            offsets = table.column(cols.source_offset).to_pylist()
            ids = table.column(cols.record_id).to_pylist()
            values = table.column(cols.source_value).to_pylist()
            directory = self.dirs[key]
            tmp = directory / f".tmp-{uuid.uuid4().hex}"
            with open(tmp, "w", newline="") as f:
                writer = csv.writer(f)
                for offset, rid, value in zip(offsets, ids, values, strict=True):
                    writer.writerow([offset, rid.hex(), value.decode()])
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, directory / f"{min(offsets)}-{max(offsets)}.csv")  # atomic
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself is durable
            finally:
                os.close(fd)
        self.staged.clear()

    @override
    def abort(self) -> None:
        self.staged.clear()  # a failed epoch is never published; it replays on resume

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        held = [
            (int(offset), bytes.fromhex(rid))
            for path in self.dirs[key].glob("*.csv")
            for offset, rid, _ in csv.reader(path.open(newline=""))
            if first <= int(offset) <= last
        ]
        if not held:
            return None
        return pa.table(
            {
                self.columns.source_offset: pa.array([o for o, _ in held], pa.int64()),
                self.columns.record_id: pa.array([r for _, r in held], pa.binary(16)),
            }
        )

    @override
    def describe_target(self, key: str) -> str:
        return f"directory `{self.dirs[key]}`"


def batches() -> list[tuple[str, pa.RecordBatch]]:
    """2 source partitions x 10 batches x 10 records, keyed as every thalweg source keys them."""
    out = []
    for first in range(0, 100, 10):
        for p in range(2):
            offsets = list(range(first, first + 10))
            raw = raw_batch_from_columns(
                topic="events",
                partition=p,
                offsets=offsets,
                keys=[b"k"] * 10,
                values=[f"event {p}-{o}".encode() for o in offsets],
            )
            out.append((f"events:{p}", raw))
    return out


def main(out: Path, recovery: Path) -> None:
    """Run the flow with recovery (one epoch per batch), then count what was published."""
    flow = Dataflow("custom_sink")
    events = op.input("in", flow, TestingSource(batches()))
    op.output("csv", events, CsvSink(out))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(recovery)))
    rows = [row for path in out.glob("*/*/*.csv") for row in csv.reader(path.open(newline=""))]
    keys = {(path.parent.name, row[0]) for path in out.glob("*/*/*.csv")
            for row in csv.reader(path.open(newline=""))}  # fmt: skip
    print(f"{len(rows)} rows, {len(keys)} distinct (partition, offset)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
