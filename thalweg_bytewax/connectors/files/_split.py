"""``split_rejects``: a ``FileSource``'s output as good rows and DLQ batches."""

from __future__ import annotations

from dataclasses import dataclass

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.lanes.dlq import dlq_schema
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, metadata_columns

__all__ = ["FilesOut", "split_rejects"]


@dataclass(frozen=True)
class FilesOut:
    """The streams of :func:`split_rejects`, keyed by file (``"<path>:0"``).

    Attributes:
        ok: Batches of rows that read well: payload columns, then metadata columns.
        rejected: DLQ batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`), reason
            ``decode``, one row per unreadable row or piece of a file.
    """

    ok: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


@operator
def split_rejects(
    step_id: str, up: KeyedStream[pa.RecordBatch], *, metadata_prefix: str = DEFAULT_PREFIX
) -> FilesOut:
    """Split a :class:`FileSource`'s output into good rows and DLQ batches.

    A DLQ batch is recognised by its schema (exactly
    :func:`thalweg_bytewax.lanes.dlq.dlq_schema`, whose ``_twg_`` columns no payload may
    carry), so nothing is tagged and nothing is copied.

    Args:
        step_id: Unique step id.
        up: The keyed batches a ``FileSource`` emits.
        metadata_prefix: The source's metadata prefix.

    Returns:
        ``FilesOut(ok, rejected)``.
    """
    dlq = dlq_schema(metadata_columns(metadata_prefix, f"split_rejects `{step_id}`"))
    branch = op.branch("branch", up, lambda kv: not kv[1].schema.equals(dlq))
    return FilesOut(ok=branch.trues, rejected=branch.falses)
