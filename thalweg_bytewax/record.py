"""The record model: ``RawRecord`` for record-at-a-time code and the columnar RawBatch.

A RawBatch is a ``pyarrow.RecordBatch`` with exactly the schema of
:attr:`MetadataColumns.raw_schema`: payload bytes with the envelope intact plus every
metadata column. Builders here turn a list of confluent-kafka messages (or
``RawRecord`` objects) into one RawBatch and back, losing nothing: null and empty keys
and values stay distinct, headers keep their order, duplicate keys and null values.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.metadata import (
    DEFAULT_COLUMNS,
    RECORD_ID_BYTES,
    MetadataColumns,
    record_id,
    record_ids_array,
)

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = [
    "Header",
    "KeyedBatch",
    "Locator",
    "OffsetSpan",
    "RawRecord",
    "TimestampType",
    "empty_raw_batch",
    "offset_span",
    "raw_batch_from_columns",
    "raw_batch_from_messages",
    "raw_batch_from_native",
    "raw_batch_from_records",
    "records_from_raw_batch",
]

Header = tuple[str, bytes | None]
"""One Kafka header: a name and a value that may be null."""

KeyedBatch = tuple[str, pa.RecordBatch]
"""One item of a keyed batch stream: a batch keyed by its source partition (``"orders:3"``).

Every source emits these and every operator maps them to more of them (ARCHITECTURE §2).
"""

_UTC_MS = pa.timestamp("ms", tz="UTC")
_UTC_US = pa.timestamp("us", tz="UTC")


class TimestampType(StrEnum):
    """The type of a record timestamp, as the broker reports it."""

    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"
    NOT_AVAILABLE = "NotAvailable"


# confluent_kafka.TIMESTAMP_NOT_AVAILABLE / _CREATE_TIME / _LOG_APPEND_TIME are 0 / 1 / 2;
# the numbers are part of librdkafka's stable ABI, so importing the client is not needed.
_TS_TYPES = (
    TimestampType.NOT_AVAILABLE.value,
    TimestampType.CREATE_TIME.value,
    TimestampType.LOG_APPEND_TIME.value,
)


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a record came from: cluster, topic, partition, offset and leader epoch."""

    topic: str
    partition: int
    offset: int
    cluster: str | None = None
    leader_epoch: int | None = None

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}@{self.offset}"


@dataclass(frozen=True, slots=True)
class OffsetSpan:
    """An inclusive range of offsets of one topic-partition."""

    topic: str
    partition: int
    first: int
    last: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}[{self.first}..{self.last}]"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One source record with nothing lost: the record-at-a-time form of a RawBatch row.

    ``key``/``value`` are ``None`` when absent, which is distinct from ``b""``; a
    ``None`` value is a tombstone. ``headers`` is an ordered tuple that keeps duplicate
    names and null values.
    """

    locator: Locator
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None
    timestamp_type: TimestampType = TimestampType.NOT_AVAILABLE
    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    ingest_ts: datetime = field(default_factory=lambda: datetime.now(UTC))
    record_id: bytes = b""

    def with_record_id(self) -> RawRecord:
        """Return a copy whose ``record_id`` is computed from its locator and value."""
        loc = self.locator
        rid = record_id(loc.cluster, loc.topic, loc.partition, loc.offset, self.value)
        return RawRecord(
            locator=loc,
            key=self.key,
            value=self.value,
            headers=self.headers,
            timestamp_ms=self.timestamp_ms,
            timestamp_type=self.timestamp_type,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            ingest_ts=self.ingest_ts,
            record_id=rid,
        )


def _headers_array(
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


def _constant(value: object, type_: pa.DataType, n: int) -> pa.Array:
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
    return _constant(None, type_, n)


def _assemble(
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
        columns.source_cluster: _constant(cluster, pa.string(), n),
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


def empty_raw_batch(columns: MetadataColumns = DEFAULT_COLUMNS) -> pa.RecordBatch:
    """A RawBatch with no rows."""
    return pa.RecordBatch.from_arrays(
        [pa.array([], f.type) for f in columns.raw_schema], schema=columns.raw_schema
    )


def raw_batch_from_messages(
    messages: Sequence[Message],
    *,
    cluster: str | None = None,
    columns: MetadataColumns = DEFAULT_COLUMNS,
    ingest_ts: datetime | None = None,
) -> pa.RecordBatch:
    """Build one RawBatch from confluent-kafka messages (errors must be filtered out).

    Args:
        messages: Messages as returned by ``Consumer.consume``, without error messages.
        cluster: The cluster id to stamp (``ClusterMetadata.cluster_id``).
        columns: Metadata column names (the prefix).
        ingest_ts: The read time to stamp; now when omitted.

    Returns:
        A RawBatch with one row per message, in input order.
    """
    n = len(messages)
    if n == 0:
        return empty_raw_batch(columns)
    # The builder allocates several small objects per message (header tuples, digests),
    # all freed by reference counting. Left on, the cyclic GC runs every ~700 of those
    # allocations and scans every live object of the flow: measured here, it tripled
    # the cost of `Message.headers()` (0.55 -> 1.96 us). Pause it for the batch.
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        return _from_messages(messages, n, cluster, columns, ingest_ts)
    finally:
        if gc_enabled:
            gc.enable()


def _from_messages(
    messages: Sequence[Any],  # confluent_kafka.Message; its stubs type every field Optional
    n: int,
    cluster: str | None,
    columns: MetadataColumns,
    ingest_ts: datetime | None,
) -> pa.RecordBatch:
    topics_py = [m.topic() for m in messages]
    partitions_py = [m.partition() for m in messages]
    offsets_py = [m.offset() for m in messages]
    values_py = [m.value() for m in messages]
    ts_pairs = [m.timestamp() for m in messages]
    first_topic, first_part = topics_py[0], partitions_py[0]
    offsets = pa.array(offsets_py, pa.int64())
    values = _binary_array(values_py)
    if topics_py.count(first_topic) == n and partitions_py.count(first_part) == n:
        ids = record_ids_array(cluster, first_topic, first_part, offsets, values)
        topics = _constant(first_topic, pa.string(), n)
        partitions = _constant(first_part, pa.int32(), n)
    else:
        ids = pa.array(
            [
                record_id(cluster, t, p, o, v)
                for t, p, o, v in zip(topics_py, partitions_py, offsets_py, values_py, strict=True)
            ],
            pa.binary(RECORD_ID_BYTES),
        )
        topics = pa.array(topics_py, pa.string())
        partitions = pa.array(partitions_py, pa.int32())
    type_codes = [t for t, _ in ts_pairs]
    first_type = type_codes[0]
    if first_type and type_codes.count(first_type) == n:  # the common case: one type, all set
        timestamp_types = _constant(_TS_TYPES[first_type], pa.string(), n)
        timestamps = pa.array([ts for _, ts in ts_pairs], pa.int64()).cast(_UTC_MS)
    else:
        timestamp_types = pa.array([_TS_TYPES[t] for t in type_codes], pa.string())
        timestamps = pa.array([ts if t else None for t, ts in ts_pairs], _UTC_MS)
    now = ingest_ts or datetime.now(UTC)
    return _assemble(
        columns,
        n,
        cluster=cluster,
        topics=topics,
        partitions=partitions,
        offsets=offsets,
        leader_epochs=pa.array([m.leader_epoch() for m in messages], pa.int32()),
        keys=pa.array([m.key() for m in messages], pa.binary()),
        values=values,
        timestamps=timestamps,
        timestamp_types=timestamp_types,
        headers=_headers_array(
            [m.headers() for m in messages], columns.raw_schema.field(columns.source_headers).type
        ),
        ingest_ts=pa.repeat(pa.scalar(now, _UTC_US), n),
        ids=ids,
    )


NativeColumns = tuple[Any, ...]
"""The columns of one native consume: ``_kafka_native.Consumer.consume``'s result."""

_TS_TYPE_NAMES = pa.array(_TS_TYPES, pa.string())


def raw_batch_from_native(
    native: NativeColumns,
    *,
    topic: str,
    partition: int,
    cluster: str | None = None,
    columns: MetadataColumns = DEFAULT_COLUMNS,
    ingest_ts: datetime | None = None,
) -> pa.RecordBatch:
    """Build one RawBatch from the Arrow buffers of a native batch consume.

    The buffers come from ``thalweg_bytewax._kafka_native`` (one topic-partition);
    the batch equals what :func:`raw_batch_from_messages` builds from the same
    messages, without a Python object per message.

    Args:
        native: The result of ``Consumer.consume`` (its error list is not read here).
        topic: The topic of the consumer's partition.
        partition: The partition number.
        cluster: The cluster id to stamp.
        columns: Metadata column names (the prefix).
        ingest_ts: The read time to stamp; now when omitted.

    Returns:
        A RawBatch with one row per message, in offset order.
    """
    (n, off, ts, ts_type, epoch, epoch_valid, key_valid, key_offs, key_data, val_valid,
     val_offs, val_data, hdr_lists, hdr_name_offs, hdr_names, hdr_val_valid, hdr_val_offs,
     hdr_vals, n_headers, _errors) = native  # fmt: skip
    if n == 0:
        return empty_raw_batch(columns)
    buf = pa.py_buffer

    def opt(b: bytes | None) -> pa.Buffer | None:
        return None if b is None else buf(b)

    offsets = pa.Array.from_buffers(pa.int64(), n, [None, buf(off)])
    keys = pa.Array.from_buffers(pa.binary(), n, [opt(key_valid), buf(key_offs), buf(key_data)])
    values = pa.Array.from_buffers(pa.binary(), n, [opt(val_valid), buf(val_offs), buf(val_data)])
    codes = np.frombuffer(ts_type, np.int8)
    first = int(codes[0])
    if first and bool((codes == first).all()):  # the common case: one type, all set
        timestamp_types = _constant(_TS_TYPES[first], pa.string(), n)
        timestamps = pa.Array.from_buffers(_UTC_MS, n, [None, buf(ts)])
    else:
        timestamp_types = _TS_TYPE_NAMES.take(pa.array(codes))
        set_ = pa.array(codes != 0)
        timestamps = pc.if_else(
            set_, pa.Array.from_buffers(_UTC_MS, n, [None, buf(ts)]), pa.scalar(None, _UTC_MS)
        )
    header_type = columns.raw_schema.field(columns.source_headers).type
    names = pa.Array.from_buffers(
        pa.string(), n_headers, [None, buf(hdr_name_offs), buf(hdr_names)]
    )
    # Producer-controlled bytes become a string column: refuse what is not UTF-8, as
    # confluent-kafka's Message.headers() does.
    names.validate(full=True)
    children = pa.StructArray.from_arrays(
        [
            names,
            pa.Array.from_buffers(
                pa.binary(),
                n_headers,
                [opt(hdr_val_valid), buf(hdr_val_offs), buf(hdr_vals)],
            ),
        ],
        fields=list(header_type.value_type),
    )
    headers = pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, buf(hdr_lists)]), children, type=header_type
    )
    now = ingest_ts or datetime.now(UTC)
    return _assemble(
        columns,
        n,
        cluster=cluster,
        topics=_constant(topic, pa.string(), n),
        partitions=_constant(partition, pa.int32(), n),
        offsets=offsets,
        leader_epochs=pa.Array.from_buffers(pa.int32(), n, [opt(epoch_valid), buf(epoch)]),
        keys=keys,
        values=values,
        timestamps=timestamps,
        timestamp_types=timestamp_types,
        headers=headers,
        ingest_ts=pa.repeat(pa.scalar(now, _UTC_US), n),
        ids=record_ids_array(cluster, topic, partition, offsets, values),
    )


_INT32_MAX = (1 << 31) - 1


def _binary_array(items: list[bytes | None]) -> pa.Array:
    """``pa.array(items, pa.binary())`` with one exactly sized copy of the bytes.

    The builder behind ``pa.array`` grows its data buffer by doubling; joining first
    touches each payload byte once, which matters where fresh memory is costly.
    """
    n = len(items)
    if n == 0 or set(map(type, items)) != {bytes}:
        # Nulls, and bytes-likes whose len() need not count bytes (a memoryview of
        # wider items): the builder reads each through the buffer protocol.
        return pa.array(items, pa.binary())
    lengths = np.fromiter(map(len, items), np.int64, n)  # type: ignore[arg-type]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        return pa.array(items, pa.binary())
    data = b"".join(items)  # type: ignore[arg-type]
    bufs = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), n, bufs)


def raw_batch_from_columns(
    *,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps_ms: Sequence[int | None] | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    headers: Sequence[Sequence[Header] | None] | None = None,
    cluster: str | None = None,
    columns: MetadataColumns = DEFAULT_COLUMNS,
    ingest_ts: datetime | None = None,
) -> pa.RecordBatch:
    """Build one RawBatch of a single topic-partition from plain columns.

    Used by sources that are not Kafka (sample data, files) so that everything after the
    source sees exactly the shape a real topic produces.
    """
    n = len(offsets)
    if n == 0:
        return empty_raw_batch(columns)
    now = ingest_ts or datetime.now(UTC)
    ts_type = timestamp_type if timestamps_ms is not None else TimestampType.NOT_AVAILABLE
    offsets_arr = pa.array(offsets, pa.int64())
    values_arr = pa.array(values, pa.binary())
    return _assemble(
        columns,
        n,
        cluster=cluster,
        topics=pa.array([topic] * n, pa.string()),
        partitions=pa.array([partition] * n, pa.int32()),
        offsets=offsets_arr,
        leader_epochs=pa.nulls(n, pa.int32()),
        keys=pa.array(keys, pa.binary()),
        values=values_arr,
        timestamps=pa.array(
            timestamps_ms if timestamps_ms is not None else [None] * n,
            pa.timestamp("ms", tz="UTC"),
        ),
        timestamp_types=pa.array([ts_type.value] * n, pa.string()),
        headers=_headers_array(
            headers if headers is not None else [None] * n,
            columns.raw_schema.field(columns.source_headers).type,
        ),
        ingest_ts=pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        ids=record_ids_array(cluster, topic, partition, offsets_arr, values_arr),
    )


def raw_batch_from_records(
    records: Sequence[RawRecord], *, columns: MetadataColumns = DEFAULT_COLUMNS
) -> pa.RecordBatch:
    """Build one RawBatch from ``RawRecord`` objects (record ids computed where empty)."""
    n = len(records)
    if n == 0:
        return empty_raw_batch(columns)
    locs = [r.locator for r in records]
    clusters = {loc.cluster for loc in locs}
    cluster = clusters.pop() if len(clusters) == 1 else None
    ids = [
        r.record_id
        or record_id(
            r.locator.cluster, r.locator.topic, r.locator.partition, r.locator.offset, r.value
        )
        for r in records
    ]
    batch = _assemble(
        columns,
        n,
        cluster=cluster,
        topics=pa.array([loc.topic for loc in locs], pa.string()),
        partitions=pa.array([loc.partition for loc in locs], pa.int32()),
        offsets=pa.array([loc.offset for loc in locs], pa.int64()),
        leader_epochs=pa.array([loc.leader_epoch for loc in locs], pa.int32()),
        keys=pa.array([r.key for r in records], pa.binary()),
        values=pa.array([r.value for r in records], pa.binary()),
        timestamps=pa.array([r.timestamp_ms for r in records], pa.timestamp("ms", tz="UTC")),
        timestamp_types=pa.array([str(r.timestamp_type) for r in records], pa.string()),
        headers=_headers_array(
            [r.headers for r in records], columns.raw_schema.field(columns.source_headers).type
        ),
        ingest_ts=pa.array([r.ingest_ts for r in records], pa.timestamp("us", tz="UTC")),
        ids=pa.array(ids, pa.binary(RECORD_ID_BYTES)),
        producer=(
            pa.array([r.producer_id for r in records], pa.int64()),
            pa.array([r.producer_epoch for r in records], pa.int16()),
            pa.array([r.base_sequence for r in records], pa.int32()),
        ),
    )
    if len(clusters) > 0:  # mixed clusters: stamp each row's own
        idx = batch.schema.get_field_index(columns.source_cluster)
        batch = batch.set_column(
            idx, columns.source_cluster, pa.array([loc.cluster for loc in locs], pa.string())
        )
    return batch


def records_from_raw_batch(
    batch: pa.RecordBatch, *, columns: MetadataColumns = DEFAULT_COLUMNS
) -> list[RawRecord]:
    """Turn a RawBatch back into ``RawRecord`` objects, one per row, nothing lost."""
    d: dict[str, list[Any]] = batch.to_pydict()
    c = columns
    ts_col = batch.column(c.source_timestamp).cast(pa.int64()).to_pylist()
    out: list[RawRecord] = []
    for i in range(batch.num_rows):
        hdrs = d[c.source_headers][i] or []
        out.append(
            RawRecord(
                locator=Locator(
                    topic=d[c.source_topic][i],
                    partition=d[c.source_partition][i],
                    offset=d[c.source_offset][i],
                    cluster=d[c.source_cluster][i],
                    leader_epoch=d[c.source_leader_epoch][i],
                ),
                key=d[c.source_key][i],
                value=d[c.source_value][i],
                headers=tuple((h["key"], h["value"]) for h in hdrs),
                timestamp_ms=ts_col[i],
                timestamp_type=TimestampType(d[c.source_timestamp_type][i]),
                producer_id=d[c.source_producer_id][i],
                producer_epoch=d[c.source_producer_epoch][i],
                base_sequence=d[c.source_base_sequence][i],
                ingest_ts=d[c.ingest_ts][i],
                record_id=d[c.record_id][i],
            )
        )
    return out


def offset_span(batch: pa.RecordBatch, *, columns: MetadataColumns = DEFAULT_COLUMNS) -> OffsetSpan:
    """The (topic, partition, first, last) span of a non-empty single-partition batch."""
    offsets = batch.column(columns.source_offset)
    bounds = pc.min_max(offsets)
    return OffsetSpan(
        topic=batch.column(columns.source_topic)[0].as_py(),
        partition=batch.column(columns.source_partition)[0].as_py(),
        first=bounds["min"].as_py(),
        last=bounds["max"].as_py(),
    )


def iter_headers(
    batch: pa.RecordBatch, columns: MetadataColumns = DEFAULT_COLUMNS
) -> Iterable[tuple[Header, ...]]:
    """Yield each row's headers as an ordered tuple (for tests and record-at-a-time code)."""
    for hs in batch.column(columns.source_headers).to_pylist():
        yield tuple((h["key"], h["value"]) for h in (hs or []))
