"""Batch ↔ record-at-a-time conversions, for flows that want one Python object per record.

Columnar flows are faster; these operators exist for code that is simpler with one
record at a time (ADR-0001): ``to_raw_records`` turns RawBatches into
:class:`~thalweg_bytewax.records.model.RawRecord` objects, ``to_dicts`` turns decoded batches
into one ``dict`` per row. Both keep the stream key (the source partition).
"""

from __future__ import annotations

from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.batches import records_from_raw_batch
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataPolicy, metadata_columns
from thalweg_bytewax.records.model import RawRecord

__all__ = ["to_dicts", "to_raw_records"]


@operator
def to_raw_records(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    *,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> KeyedStream[RawRecord]:
    """Turn keyed RawBatches into keyed ``RawRecord`` items, one per record, nothing lost.

    ```python
    import thalweg_bytewax.operators as twg

    records = twg.to_raw_records("records", raw)  # ("orders:3", RawRecord(...))
    ```

    Args:
        step_id: Unique step id.
        up: Keyed RawBatches, as a source emits them.
        metadata_prefix: Prefix of the metadata columns.

    Returns:
        A keyed stream of ``RawRecord``, in offset order within each key.
    """
    columns = metadata_columns(metadata_prefix, f"to_raw_records `{step_id}`")
    return op.flat_map_value(
        "to_records", up, lambda batch: records_from_raw_batch(batch, columns=columns)
    )


@operator
def to_dicts(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    *,
    metadata: MetadataPolicy | str = MetadataPolicy.ALL,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> KeyedStream[dict[str, Any]]:
    """Turn keyed decoded batches into keyed ``dict`` items, one per row.

    Values are the Python values of the Arrow columns (``Decimal``, aware
    ``datetime`` for UTC timestamps, ``bytes``; maps become dicts), i.e. what the
    codec's ``decode_value`` returns, plus the metadata columns the batch carries.

    ```python
    import thalweg_bytewax.operators as twg

    decoded = twg.decode("decode", raw, codec)
    orders = twg.to_dicts("orders", decoded.ok, metadata="none")  # ("orders:3", {...})
    ```

    Args:
        step_id: Unique step id.
        up: Keyed Arrow batches (e.g. ``decode(...).ok``).
        metadata: Which metadata columns (``_twg_…``) each dict keeps, the policy
            ``decode`` applies: ``"none"``, ``"locator"`` (topic, partition, offset,
            record id) or ``"all"`` (every one the batch carries).
        metadata_prefix: Prefix of the metadata columns.

    Returns:
        A keyed stream of dicts, in row order within each key.

    Raises:
        ConfigError: At build time, for an unknown metadata policy or prefix.
    """
    columns = metadata_columns(metadata_prefix, f"to_dicts `{step_id}`")
    try:
        policy = MetadataPolicy(metadata)
    except ValueError as exc:
        msg = (
            f"to_dicts `{step_id}`: expected metadata 'none', 'locator' or 'all'; "
            f"got {metadata!r}"
        )
        raise ConfigError(msg) from exc
    kept = set(columns.locator_columns()) if policy is MetadataPolicy.LOCATOR else set()

    def rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
        if policy is not MetadataPolicy.ALL:
            names = batch.schema.names
            batch = batch.select([n for n in names if not columns.is_reserved(n) or n in kept])
        out: list[dict[str, Any]] = batch.to_pylist(maps_as_pydicts="strict")
        return out

    return op.flat_map_value("to_dicts", up, rows)
