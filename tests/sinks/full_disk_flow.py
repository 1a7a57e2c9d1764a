"""A flow that writes about 16 MiB into a Parquet lane at ``THALWEG_TEST_LANE``.

Run as ``python -m bytewax.run tests.sinks.full_disk_flow:flow`` on a file system (or
under a file size limit) too small for it: the lane's writes fail mid-epoch.
"""

from __future__ import annotations

import hashlib
import os

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

from thalweg_bytewax.connectors.parquet import ParquetSink

ROWS = 2_000


def _batch(start: int) -> pa.RecordBatch:
    ids = [
        hashlib.blake2b(f"t/0/{o}".encode(), digest_size=16).digest()
        for o in range(start, start + ROWS)
    ]
    return pa.RecordBatch.from_pydict(
        {
            # Incompressible text, so the files are as large as the rows.
            "payload": pa.array([hashlib.sha512(i).hexdigest() * 4 for i in ids]),
            "_twg_source_topic": pa.array(["t"] * ROWS),
            "_twg_source_partition": pa.array([0] * ROWS, pa.int32()),
            "_twg_source_offset": pa.array(range(start, start + ROWS), pa.int64()),
            "_twg_record_id": pa.array(ids, pa.binary(16)),
        }
    )


flow = Dataflow("full_disk")
rows = op.input("in", flow, TestingSource([("t:0", _batch(i * ROWS)) for i in range(16)]))
op.output("out", rows, ParquetSink(os.environ["THALWEG_TEST_LANE"]))
