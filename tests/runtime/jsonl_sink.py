"""A tiny real sink on the epoch-sink base: JSON lines files, durable at the snapshot.

Layout: ``<root>/<topic>/<partition>/<first>-<last>.jsonl``, one line per row with its
offset, record id (hex) and value. ``stage`` only buffers in memory (pipelined, no I/O);
``commit_epoch`` writes a hidden temporary file per source partition, fsyncs it, renames
it to its final name and fsyncs the directory. Used by ``test_epoch_sink.py``, in
process and as a subprocess flow killed at the base's fault points.
"""

from __future__ import annotations

import json
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
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.batches import raw_batch_from_records
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.records.model import Locator, RawRecord
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition, EpochSinkState
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink

FINAL = re.compile(r"^(\d+)-(\d+)\.jsonl$")


class JsonlSink(ShardedEpochSink["JsonlPartition"]):
    """JSON lines per source partition, published at each epoch's snapshot."""

    def __init__(self, root: str | os.PathLike[str], *, shards: int = 1) -> None:
        self.root = Path(root)
        self.shards = shards
        self.columns = MetadataColumns(DEFAULT_PREFIX)
        self.fail_stage = False
        self.fail_commit = False
        self.built: list[JsonlPartition] = []

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> JsonlPartition:
        part = JsonlPartition(self, shard, resume_state)
        self.built.append(part)
        return part


class JsonlPartition(EpochSinkPartition):
    """The partition: in-memory staging, fsync + rename at ``commit_epoch``."""

    def __init__(self, sink: JsonlSink, shard: int, resume: EpochSinkState | None) -> None:
        super().__init__(
            component="jsonl sink",
            columns=sink.columns,
            resume_state=resume,
            shard=shard,
            shards=sink.shards,
        )
        self.sink = sink
        self.dirs: dict[str, Path] = {}
        self.staged: dict[str, list[pa.RecordBatch]] = {}
        self.aborted = 0
        self.released = 0

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        directory = self.sink.root / topic / str(partition)
        directory.mkdir(parents=True, exist_ok=True)
        self.dirs[key] = directory
        spans = []
        for path in directory.iterdir():
            if m := FINAL.match(path.name):
                spans.append((int(m.group(1)), int(m.group(2))))
            elif path.name.startswith(".tmp-"):
                path.unlink()  # an epoch that never committed
        return OffsetCoverage(spans)

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        if self.sink.fail_stage:
            msg = f"jsonl sink: `{key}`: staging failed"
            raise SinkTransientError(msg)
        self.staged.setdefault(key, []).append(rows)

    @override
    def commit_epoch(self) -> None:
        if self.sink.fail_commit:
            msg = "jsonl sink: commit failed"
            raise SinkTransientError(msg)
        cols = self.columns
        for key, batches in self.staged.items():
            table = pa.Table.from_batches(batches)
            offsets = table.column(cols.source_offset).to_pylist()
            ids = table.column(cols.record_id).to_pylist()
            values = table.column(cols.source_value).to_pylist()
            directory = self.dirs[key]
            tmp = directory / f".tmp-{uuid.uuid4().hex}"
            with open(tmp, "w") as f:
                for o, r, v in zip(offsets, ids, values, strict=True):
                    f.write(json.dumps({"offset": o, "id": r.hex(), "value": v.decode()}) + "\n")
                f.flush()
                os.fsync(f.fileno())
            final = directory / f"{min(offsets)}-{max(offsets)}.jsonl"
            try:
                os.link(tmp, final)  # never overwrite: a replay written twice fails here
            except FileExistsError:
                msg = f"jsonl sink: `{final}` already exists"
                raise SinkTerminalError(msg) from None
            finally:
                os.remove(tmp)
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.staged.clear()

    @override
    def abort(self) -> None:
        self.aborted += 1
        self.staged.clear()

    @override
    def release(self) -> None:
        self.released += 1

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        rows = [
            row
            for path in self.dirs[key].glob("*.jsonl")
            for row in map(json.loads, path.read_text().splitlines())
            if first <= row["offset"] <= last
        ]
        if not rows:
            return None
        return pa.table(
            {
                self.columns.source_offset: pa.array([r["offset"] for r in rows], pa.int64()),
                self.columns.record_id: pa.array(
                    [bytes.fromhex(r["id"]) for r in rows], pa.binary(16)
                ),
            }
        )

    @override
    def describe_target(self, key: str) -> str:
        return f"directory `{self.dirs[key]}`"


def read_rows(root: Path) -> list[tuple[str, int, int, str]]:
    """Every published row as (topic, partition, offset, value), sorted."""
    out = []
    for path in root.glob("*/*/*.jsonl"):
        topic, partition = path.parent.parent.name, int(path.parent.name)
        for line in path.read_text().splitlines():
            row = json.loads(line)
            out.append((topic, partition, row["offset"], row["value"]))
    return sorted(out)


def rows(topic: str, partition: int, offsets: list[int], tag: str = "v") -> pa.RecordBatch:
    """A RawBatch of one source partition, values ``<tag><offset>``."""
    return raw_batch_from_records(
        [RawRecord(Locator(topic, partition, o, "c"), b"k", f"{tag}{o}".encode()) for o in offsets]
    )


def items(partitions: int = 2, batches: int = 8, per_batch: int = 5) -> list[tuple[str, pa.RecordBatch]]:
    """Keyed batches of ``t:<p>``, interleaved across partitions, in offset order."""
    out = []
    for b in range(batches):
        for p in range(partitions):
            offsets = list(range(b * per_batch, (b + 1) * per_batch))
            out.append((f"t:{p}", rows("t", p, offsets)))
    return out


def main() -> None:
    """Run the flow over ``items()`` with recovery: ``main ROOT RECOVERY_DIR``."""
    root, recovery = sys.argv[1], sys.argv[2]
    flow = Dataflow("epoch")
    up = op.input("in", flow, TestingSource(items()))
    op.output("out", up, JsonlSink(root, shards=2))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(recovery))


if __name__ == "__main__":
    main()
