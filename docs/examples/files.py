"""Files in: CSV and NDJSON orders read by FileSource into a Parquet lane, bad rows to a DLQ.

Run it: ``python docs/examples/files.py [WORKDIR]``. It writes two small files (one
with a ragged CSV row, one with a broken JSON line), reads them with a schema into
``WORKDIR/lane`` and the rejects into ``WORKDIR/dlq``, and prints what landed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main

from thalweg_bytewax.connectors.files import FileSource, split_rejects
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.lanes.dlq import read_dlq

SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


def main(work: Path) -> None:
    """Write the two files, run the flow, print what landed and what was rejected."""
    data = work / "in"
    data.mkdir(parents=True, exist_ok=True)
    (data / "a.csv").write_text("order_id,customer,amount\n1,ada,10.5\n2,bob,3.0,extra\n3,cy,7\n")
    (data / "b.ndjson").write_text(
        '{"order_id": 4, "customer": "dee", "amount": 1.25}\n{"order_id": 5, "customer"\n'
    )

    flow = Dataflow("orders_files")
    raw = op.input("in", flow, FileSource([str(data / "*.csv"), str(data / "*.ndjson")],
                                          schema=SCHEMA))
    files = split_rejects("split", raw)
    op.output("lane", files.ok, ParquetSink(str(work / "lane")))
    op.output("dlq", files.rejected, ParquetSink(str(work / "dlq")))
    run_main(flow)

    lane = read_lane(str(work / "lane")).sort_by("order_id")
    print("orders:", lane.column("order_id").to_pylist())
    for row in read_dlq(str(work / "dlq")).sort_by("_twg_source_offset").to_pylist():
        name = Path(row["_twg_source_topic"]).name
        print(f"rejected: {name} row {row['_twg_source_offset']}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
