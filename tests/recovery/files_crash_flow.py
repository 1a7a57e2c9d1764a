"""FileSource -> ParquetSink, for the kill-and-resume test of file sources.

Configured by environment: ``THALWEG_FILES`` (a glob), ``THALWEG_LANE`` (the lane
directory), ``THALWEG_DELAY_S`` (a pause per batch, so a run spans several epochs).
"""

from __future__ import annotations

import os
import time

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.files import FileSource, split_rejects
from thalweg_bytewax.connectors.parquet import ParquetSink

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
DELAY_S = float(os.environ.get("THALWEG_DELAY_S", "0.1"))


def _slow(item: tuple[str, pa.RecordBatch]) -> tuple[str, pa.RecordBatch]:
    time.sleep(DELAY_S)
    return item


flow = Dataflow("files_crash")
raw = op.input("in", flow, FileSource(os.environ["THALWEG_FILES"], schema=SCHEMA, batch_rows=400))
files = split_rejects("split", op.map("slow", raw, _slow))
op.output("lane", files.ok, ParquetSink(os.environ["THALWEG_LANE"], shards=2))
