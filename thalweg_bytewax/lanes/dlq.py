"""The one dead-letter record format of the project, with stable reason codes.

Every stage that can reject a record (decode, contract, data quality, a sink that
exhausted its retries, a WASM function that failed) emits DLQ rows with the same Arrow
schema, so one DLQ stream and one DLQ table serve the whole flow. A DLQ row keeps what
is needed to understand and replay the failure: the reason code, the failed rule ids, a
human message naming what and where, the step, the record's locator and id, the raw key
and payload bytes with the envelope intact (where the batch still carries them), the
decoded row as JSON (where there is one) and when it was rejected.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from thalweg_bytewax.records.ids import RECORD_ID_BYTES
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import Locator

if TYPE_CHECKING:
    # The reader's modules (pyarrow.dataset: ~7 MB) load on the first read, not with the
    # reason codes and DLQ batches every flow's operators and sinks import.
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

__all__ = [
    "DLQ_MESSAGE",
    "DLQ_REASON",
    "DLQ_REJECTED_AT",
    "DLQ_ROW_JSON",
    "DLQ_RULES",
    "DLQ_STEP_ID",
    "RejectReason",
    "Rejected",
    "dlq_batch_from_rows",
    "dlq_schema",
    "dlq_whole_batch",
    "read_dlq",
    "rejected_from_dlq_batch",
    "rejected_to_batch",
]

DLQ_REASON = "reason"
"""Column: the :class:`RejectReason` code."""
DLQ_RULES = "rules"
"""Column: ids of the failed rules (``name@version``); empty for decode failures."""
DLQ_MESSAGE = "message"
"""Column: human text saying what is wrong and where."""
DLQ_STEP_ID = "step_id"
"""Column: the dataflow step that rejected the record."""
DLQ_ROW_JSON = "row_json"
"""Column: the decoded row as JSON, where the record was decoded."""
DLQ_REJECTED_AT = "rejected_at"
"""Column: when the record was rejected (UTC)."""

_DEFAULT_COLUMNS = MetadataColumns()


class RejectReason(StrEnum):
    """Why a record went to the dead-letter queue. The values are stable."""

    DECODE = "decode"
    """The payload could not be decoded (bad framing, unknown schema id, corrupt body)."""
    CONTRACT = "contract"
    """The record violates the data contract's schema (type, required, format)."""
    DQ = "dq"
    """The record fails a data-quality rule."""
    RETRY_EXHAUSTED = "retry_exhausted"
    """A sink could not write the record, or a sidecar answer it, after the retries."""
    UDF = "udf"
    """A WASM user-defined function failed on the record: out of fuel, past its memory
    cap, a trap or a non-zero status (the message says which)."""


def dlq_schema(columns: MetadataColumns = _DEFAULT_COLUMNS) -> pa.Schema:
    """The Arrow schema of a DLQ batch under the given metadata prefix."""
    return pa.schema(
        [
            pa.field(DLQ_REASON, pa.string(), nullable=False),
            pa.field(DLQ_RULES, pa.list_(pa.string()), nullable=False),
            pa.field(DLQ_MESSAGE, pa.string(), nullable=False),
            pa.field(DLQ_STEP_ID, pa.string(), nullable=False),
            pa.field(columns.source_cluster, pa.string()),
            pa.field(columns.source_topic, pa.string()),
            pa.field(columns.source_partition, pa.int32()),
            pa.field(columns.source_offset, pa.int64()),
            pa.field(columns.record_id, pa.binary(RECORD_ID_BYTES)),
            pa.field(columns.source_key, pa.binary()),
            pa.field(columns.source_value, pa.binary()),
            pa.field(DLQ_ROW_JSON, pa.string()),
            pa.field(DLQ_REJECTED_AT, pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


@dataclass(frozen=True, slots=True)
class Rejected:
    """One rejected record, record-at-a-time form of a DLQ row."""

    reason: RejectReason
    step_id: str
    message: str
    locator: Locator | None
    rules: tuple[str, ...] = ()
    record_id: bytes | None = None
    raw_key: bytes | None = None
    raw_value: bytes | None = None
    row_json: str | None = None
    rejected_at: datetime | None = None


def rejected_to_batch(
    rejected: Sequence[Rejected], *, columns: MetadataColumns = _DEFAULT_COLUMNS
) -> pa.RecordBatch:
    """Build a DLQ batch from ``Rejected`` objects."""
    now = datetime.now(UTC)
    locs = [r.locator for r in rejected]
    return pa.RecordBatch.from_pydict(
        {
            DLQ_REASON: [str(r.reason) for r in rejected],
            DLQ_RULES: [list(r.rules) for r in rejected],
            DLQ_MESSAGE: [r.message for r in rejected],
            DLQ_STEP_ID: [r.step_id for r in rejected],
            columns.source_cluster: [loc.cluster if loc else None for loc in locs],
            columns.source_topic: [loc.topic if loc else None for loc in locs],
            columns.source_partition: [loc.partition if loc else None for loc in locs],
            columns.source_offset: [loc.offset if loc else None for loc in locs],
            columns.record_id: [r.record_id for r in rejected],
            columns.source_key: [r.raw_key for r in rejected],
            columns.source_value: [r.raw_value for r in rejected],
            DLQ_ROW_JSON: [r.row_json for r in rejected],
            DLQ_REJECTED_AT: [r.rejected_at or now for r in rejected],
        },
        schema=dlq_schema(columns),
    )


def dlq_batch_from_rows(
    source: pa.RecordBatch,
    indices: Sequence[int] | pa.Array,
    *,
    reason: RejectReason | pa.Array,
    step_id: str,
    messages: Sequence[str] | pa.Array,
    rules: Sequence[Sequence[str]] | pa.Array | None = None,
    row_json: Sequence[str | None] | pa.Array | None = None,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.RecordBatch:
    """Build a DLQ batch, columnar, from selected rows of a batch carrying metadata columns.

    Metadata columns that ``source`` lacks (e.g. a decoded lane under the ``none``
    policy, or one that no longer carries the raw bytes) are null in the DLQ rows.

    Args:
        source: The batch the rejected rows come from.
        indices: Row indices into ``source``, one per DLQ row.
        reason: The reason code for every row, or one code per row (a ``string``
            array of :class:`RejectReason` values).
        step_id: The rejecting step.
        messages: One human message per row.
        rules: Failed rule ids per row (default: none).
        row_json: The decoded row as JSON per row (default: null).
        columns: Metadata column names (the prefix).

    Returns:
        A batch with :func:`dlq_schema`.
    """
    schema = dlq_schema(columns)
    idx = pa.array(indices, pa.int64()) if not isinstance(indices, pa.Array) else indices
    n = len(idx)
    names = set(source.schema.names)
    # Every row of the source, in order (a batch rejected whole): its columns as they are.
    whole = n == source.num_rows and (
        n == 0 or bool(np.array_equal(idx.to_numpy(zero_copy_only=False), np.arange(n)))
    )

    def take(name: str, type_: pa.DataType) -> pa.Array:
        if name in names:
            col = source.column(name) if whole else source.column(name).take(idx)
            return col if col.type == type_ else col.cast(type_)
        return pa.nulls(n, type_)

    if rules is None:
        rules = pa.ListArray.from_arrays(
            pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string())
        )
    elif not isinstance(rules, pa.Array):
        rules = pa.array([list(r) for r in rules], pa.list_(pa.string()))
    if row_json is None:
        row_json = pa.nulls(n, pa.string())
    elif not isinstance(row_json, pa.Array):
        row_json = pa.array(row_json, pa.string())
    arrays: dict[str, pa.Array] = {
        DLQ_REASON: reason
        if isinstance(reason, pa.Array)
        else pa.repeat(pa.scalar(str(reason), pa.string()), n),
        DLQ_RULES: rules,
        DLQ_MESSAGE: messages
        if isinstance(messages, pa.Array)
        else pa.array(messages, pa.string()),
        DLQ_STEP_ID: pa.repeat(pa.scalar(step_id, pa.string()), n),
        DLQ_ROW_JSON: row_json,
        DLQ_REJECTED_AT: pa.repeat(pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC")), n),
    }
    out = [arrays[f.name] if f.name in arrays else take(f.name, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(out, schema=schema)


def dlq_whole_batch(
    source: pa.RecordBatch,
    *,
    reason: RejectReason,
    step_id: str,
    message: str,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.RecordBatch:
    """Every row of ``source`` as a DLQ row with one reason and one message.

    For a batch rejected whole (a failing function, a sidecar that never answered):
    :func:`dlq_batch_from_rows` over all its rows, in order.
    """
    n = source.num_rows
    return dlq_batch_from_rows(
        source,
        pa.array(np.arange(n, dtype=np.int64)),
        reason=reason,
        step_id=step_id,
        messages=pa.repeat(pa.scalar(message, pa.string()), n),
        columns=columns,
    )


def rejected_from_dlq_batch(
    batch: pa.RecordBatch, *, columns: MetadataColumns = _DEFAULT_COLUMNS
) -> list[Rejected]:
    """Read DLQ rows back as ``Rejected`` objects (e.g. from a DLQ Parquet table)."""
    d = batch.to_pydict()
    out: list[Rejected] = []
    for i in range(batch.num_rows):
        topic = d[columns.source_topic][i]
        loc = (
            Locator(
                topic=topic,
                partition=d[columns.source_partition][i],
                offset=d[columns.source_offset][i],
                cluster=d[columns.source_cluster][i],
            )
            if topic is not None
            else None
        )
        out.append(
            Rejected(
                reason=RejectReason(d[DLQ_REASON][i]),
                step_id=d[DLQ_STEP_ID][i],
                message=d[DLQ_MESSAGE][i],
                locator=loc,
                rules=tuple(d[DLQ_RULES][i]),
                record_id=d[columns.record_id][i],
                raw_key=d[columns.source_key][i],
                raw_value=d[columns.source_value][i],
                row_json=d[DLQ_ROW_JSON][i],
                rejected_at=d[DLQ_REJECTED_AT][i],
            )
        )
    return out


def read_dlq(
    source: str | os.PathLike[str] | ds.Dataset,
    *,
    reason: RejectReason | str | Sequence[RejectReason | str] | None = None,
    filesystem: pafs.FileSystem | None = None,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.Table:
    """Read a DLQ lane back, e.g. one written by ``ParquetSink`` from ``validate(...).rejected``.

    ```python
    from thalweg_bytewax.lanes.dlq import read_dlq, rejected_from_dlq_batch

    bad = read_dlq("lake/dlq", reason="dq")
    for rejected in rejected_from_dlq_batch(bad.to_batches()[0]):
        print(rejected.locator, rejected.rules, rejected.message)
    ```

    Args:
        source: The lane directory (local path or URI), or a ``pyarrow.dataset.Dataset``.
        reason: Keep only rows with this reason code (or any of these).
        filesystem: A ``pyarrow.fs.FileSystem`` for ``source``.
        columns: Metadata column names (the prefix), for the schema of an empty lane.

    Returns:
        The DLQ rows (:func:`dlq_schema` plus the columns the sink adds, such as
        ``_twg_emit_ts``), filtered by ``reason``.

    Raises:
        ValueError: For an unknown reason code.
    """
    import pyarrow.dataset as ds  # noqa: PLC0415 - see the module's imports

    from thalweg_bytewax.lanes.read import read_lane  # noqa: PLC0415 - likewise

    expr = None
    if reason is not None:
        wanted = [reason] if isinstance(reason, str) else list(reason)
        codes = [str(RejectReason(r)) for r in wanted]
        expr = ds.field(DLQ_REASON).isin(codes)
    return read_lane(source, schema=dlq_schema(columns), filter=expr, filesystem=filesystem)
