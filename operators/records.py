"""Batch ↔ record-at-a-time conversions, for flows that want one Python object per record.

Columnar flows are faster; these operators exist for code that is simpler with one
record at a time (ADR-0001): ``to_raw_records`` turns RawBatches into
:class:`~thalweg_bytewax.record.RawRecord` objects, ``to_dicts`` turns decoded batches
into one ``dict`` per row. Both keep the stream key (the source partition).
"""

from __future__ import annotations

from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.metadata import MetadataColumns
from thalweg_bytewax.record import RawRecord, records_from_raw_batch

__all__ = ["to_dicts", "to_raw_records"]

_DEFAULT_COLUMNS = MetadataColumns()


@operator
def to_raw_records(
    step_id: str,
    raw: KeyedStream[pa.RecordBatch],
    *,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> KeyedStream[RawRecord]:
    """Turn keyed RawBatches into keyed ``RawRecord`` items, one per record, nothing lost.

    ```python
    import thalweg_bytewax.operators as twg

    records = twg.to_raw_records("records", raw)  # ("orders:3", RawRecord(...))
    ```

    Args:
        step_id: Unique step id.
        raw: Keyed RawBatches, as a source emits them.
        columns: Metadata column names (the prefix).

    Returns:
        A keyed stream of ``RawRecord``, in offset order within each key.
    """
    return op.flat_map_value(
        "to_records", raw, lambda batch: records_from_raw_batch(batch, columns=columns)
    )


@operator
def to_dicts(
    step_id: str,
    batches: KeyedStream[pa.RecordBatch],
    *,
    metadata: bool = True,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> KeyedStream[dict[str, Any]]:
    """Turn keyed decoded batches into keyed ``dict`` items, one per row.

    Values are the Python values of the Arrow columns (``Decimal``, aware
    ``datetime`` for UTC timestamps, ``bytes``; maps become dicts), i.e. what the
    codec's ``decode_value`` returns, plus the metadata columns the batch carries.

    ```python
    import thalweg_bytewax.operators as twg

    decoded = twg.decode("decode", raw, codec)
    orders = twg.to_dicts("orders", decoded.ok, metadata=False)  # ("orders:3", {...})
    ```

    Args:
        step_id: Unique step id.
        batches: Keyed Arrow batches (e.g. ``decode(...).ok``).
        metadata: Keep the metadata columns (``_twg_…``) in each dict.
        columns: Metadata column names (the prefix).

    Returns:
        A keyed stream of dicts, in row order within each key.
    """

    def rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
        if not metadata:
            batch = batch.select([n for n in batch.schema.names if not columns.is_reserved(n)])
        out: list[dict[str, Any]] = batch.to_pylist(maps_as_pydicts="strict")
        return out

    return op.flat_map_value("to_dicts", batches, rows)
