"""Functions `thalweg sidecar serve` serves in tests."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def with_length(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with the byte length of each payload appended."""
    return batch.append_column("length", pc.binary_length(batch.column("_twg_source_value")))
