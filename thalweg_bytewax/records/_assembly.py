"""Private: how every RawBatch builder assembles its columns under the raw schema.

The builders (:mod:`thalweg_bytewax.records.batches`,
:mod:`thalweg_bytewax.records.kafka_batches`) compute the columns a source supplies;
:func:`assemble` orders them under :attr:`MetadataColumns.raw_schema` and fills every
other column with nulls, cut from columns shared between batches (:func:`constant`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, chain

import numpy as np
import pyarrow as pa

from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import Header

__all__ = ["UTC_MS", "UTC_US", "assemble", "constant", "headers_array"]

UTC_MS = pa.timestamp("ms", tz="UTC")
UTC_US = pa.timestamp("us", tz="UTC")


def headers_array(
    all_headers: Sequence[Sequence[Header] | None], header_type: pa.DataType
) -> pa.Array:
    # Flatten with C-level iteration; records without headers cost one len() each.
    lengths = [len(h) if h else 0 for h in all_headers]
    flat = list(chain.from_iterable(h for h in all_headers if h))
    struct_type = header_type.value_type
    children = pa.StructArray.from_arrays(
        [pa.array([k for k, _ in flat], pa.string()), pa.array([v for _, v in flat], pa.binary())],
        fields=list(struct_type),
    )
    offsets = pa.array([0, *accumulate(lengths)], pa.int32())
    return pa.ListArray.from_arrays(offsets, children, type=header_type)


# Columns that hold one value for the whole batch (cluster, topic, partition, timestamp
# type, absent columns) are cut from one column per value, built once and reused:
# building them per batch allocated fresh memory each time (its first touch costs more
# than the copy), ~45 bytes a record for the sample orders. A batch gets a column of
# exactly its length whose buffers are slices of the shared ones, sized to that length:
# a pickled buffer carries only its slice (an array slice would carry its whole
# buffers, pyarrow), and batches crossing between processes are pickled. Polls vary in
# length, so the shared column grows to the longest batch up to _CONSTANT_ROWS rows
# (longer columns are built and not kept); the cache is dropped when it holds more
# than _CONSTANTS_MAX_BYTES in all.
_CONSTANT_ROWS = 1 << 16
_CONSTANTS_MAX_BYTES = 32 << 20
_CONSTANTS: dict[tuple[pa.DataType, object], pa.Array] = {}
_constants_bytes = [0]


def constant(value: object, type_: pa.DataType, n: int) -> pa.Array:
    """``n`` copies of ``value`` (None: nulls), cut from a column shared between batches."""
    if n > _CONSTANT_ROWS or not _cuttable(type_):
        return _repeat(value, type_, n)
    key = (type_, value)
    shared = _CONSTANTS.get(key)
    if shared is None or len(shared) < n:
        rows = min(max(n, 2 * len(shared) if shared is not None else 0), _CONSTANT_ROWS)
        shared = _repeat(value, type_, rows)
        old = _CONSTANTS.pop(key, None)
        _constants_bytes[0] -= old.nbytes if old is not None else 0
        if _constants_bytes[0] + shared.nbytes > _CONSTANTS_MAX_BYTES:
            _CONSTANTS.clear()
            _constants_bytes[0] = 0
        _CONSTANTS[key] = shared
        _constants_bytes[0] += shared.nbytes
    return shared if len(shared) == n else _prefix(shared, n)


def _repeat(value: object, type_: pa.DataType, n: int) -> pa.Array:
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def _cuttable(type_: pa.DataType) -> bool:
    """Whether :func:`_prefix` cuts this type: strings, binaries, fixed-width primitives."""
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return True
    return pa.types.is_primitive(type_) and not pa.types.is_boolean(type_)


def _prefix(column: pa.Array, n: int) -> pa.Array:
    """The first ``n`` values of a constant column, each buffer a slice of exactly their size."""
    type_ = column.type
    buffers = column.buffers()
    validity = None if buffers[0] is None else buffers[0].slice(0, (n + 7) // 8)
    nulls = n if column.null_count else 0  # all nulls or none
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        offsets, data = buffers[1], buffers[2]
        width = int(np.frombuffer(offsets, np.int32, count=2)[1]) if len(column) else 0
        cut = None if data is None else data.slice(0, n * width)
        ends = offsets.slice(0, 4 * (n + 1))
        return pa.Array.from_buffers(type_, n, [validity, ends, cut], null_count=nulls)
    data = buffers[1].slice(0, n * type_.bit_width // 8)
    return pa.Array.from_buffers(type_, n, [validity, data], null_count=nulls)


def _null(n: int, type_: pa.DataType) -> pa.Array:
    return constant(None, type_, n)


def assemble(
    columns: MetadataColumns,
    n: int,
    *,
    cluster: str | None,
    topics: pa.Array,
    partitions: pa.Array,
    offsets: pa.Array,
    leader_epochs: pa.Array,
    keys: pa.Array,
    values: pa.Array,
    timestamps: pa.Array,
    timestamp_types: pa.Array,
    headers: pa.Array,
    ingest_ts: pa.Array,
    ids: pa.Array,
    producer: tuple[pa.Array, pa.Array, pa.Array] | None = None,
) -> pa.RecordBatch:
    schema = columns.raw_schema
    by_name: dict[str, pa.Array] = {
        columns.source_cluster: constant(cluster, pa.string(), n),
        columns.source_topic: topics,
        columns.source_partition: partitions,
        columns.source_offset: offsets,
        columns.source_leader_epoch: leader_epochs,
        columns.source_key: keys,
        columns.source_value: values,
        columns.source_timestamp: timestamps,
        columns.source_timestamp_type: timestamp_types,
        columns.source_headers: headers,
        columns.ingest_ts: ingest_ts,
        columns.record_id: ids,
    }
    if producer is not None:
        by_name[columns.source_producer_id] = producer[0]
        by_name[columns.source_producer_epoch] = producer[1]
        by_name[columns.source_base_sequence] = producer[2]
    arrays = [by_name[f.name] if f.name in by_name else _null(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
