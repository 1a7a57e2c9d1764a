"""Arrow IPC out and back in: a flow writes a directory, another process maps it, a flow reads it.

Run it: ``python docs/examples/arrow_ipc.py [WORKDIR]``. A flow writes 4 partitions of
RawBatches to ``WORKDIR/ipc`` with ``ArrowIPCSink`` (one ``.arrow`` file per partition
and epoch); a separate Python process memory-maps the finished files and counts their
rows without decoding anything; a second flow reads the directory with
``ArrowIPCSource`` into a Parquet lane under ``WORKDIR/lane``. It prints what each saw.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.records.batches import raw_batch_from_columns

PARTITIONS = 4
PER_PARTITION = 500

# What another process does with the finished files: map them, read the batches in place.
READER = """
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.ipc as ipc
files = [p for p in sorted(Path(sys.argv[1]).rglob("*.arrow")) if not p.name.startswith(".")]
rows = 0
for path in files:
    with pa.memory_map(str(path)) as f:
        rows += ipc.open_file(f).read_all().num_rows
print(f"another process mapped {len(files)} files: {rows} rows")
"""


def batches() -> list[tuple[str, pa.RecordBatch]]:
    """Keyed RawBatches, as a Kafka source emits them: 5 batches per partition."""
    out: list[tuple[str, pa.RecordBatch]] = []
    for first in range(0, PER_PARTITION, 100):
        for p in range(PARTITIONS):
            offsets = list(range(first, first + 100))
            batch = raw_batch_from_columns(
                topic="orders",
                partition=p,
                offsets=offsets,
                keys=[f"k{o}".encode() for o in offsets],
                values=[f"order {p}-{o}".encode() for o in offsets],
            )
            out.append((f"orders:{p}", batch))
    return out


def main(work: Path) -> None:
    """Write the directory, count it from another process, read it back into a lane."""
    flow = Dataflow("to_ipc")
    raw = op.input("in", flow, TestingSource(batches()))
    op.output("ipc", raw, ArrowIPCSink(work / "ipc"))
    run_main(flow)

    subprocess.run([sys.executable, "-c", READER, str(work / "ipc")], check=True)

    flow = Dataflow("from_ipc")
    back = op.input("in", flow, ArrowIPCSource(work / "ipc"))
    op.output("lane", back, ParquetSink(work / "lane"))
    run_main(flow)
    lane = read_lane(work / "lane", ["_twg_source_partition"])
    print(f"lane rows: {lane.num_rows} in {len(set(lane.column(0).to_pylist()))} partitions")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
