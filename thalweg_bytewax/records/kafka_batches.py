"""RawBatches from Kafka: confluent-kafka messages or the native consumer's Arrow buffers.

Only the Kafka source builds batches this way; the batch is the same RawBatch every other
source builds (:mod:`thalweg_bytewax.records.batches`), losing nothing: null and empty
keys and values stay distinct, headers keep their order, duplicate names and null values.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.records._assembly import UTC_MS, UTC_US, assemble, constant, headers_array
from thalweg_bytewax.records.batches import empty_raw_batch
from thalweg_bytewax.records.ids import RECORD_ID_BYTES, record_id, record_ids_array
from thalweg_bytewax.records.kafka_concat import NativeColumns
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.records.model import TimestampType

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = [
    "NativeColumns",
    "raw_batch_from_messages",
    "raw_batch_from_native",
]

# confluent_kafka.TIMESTAMP_NOT_AVAILABLE / _CREATE_TIME / _LOG_APPEND_TIME are 0 / 1 / 2;
# the numbers are part of librdkafka's stable ABI, so importing the client is not needed.
_TS_TYPES = (
    TimestampType.NOT_AVAILABLE.value,
    TimestampType.CREATE_TIME.value,
    TimestampType.LOG_APPEND_TIME.value,
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
        topics = constant(first_topic, pa.string(), n)
        partitions = constant(first_part, pa.int32(), n)
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
        timestamp_types = constant(_TS_TYPES[first_type], pa.string(), n)
        timestamps = pa.array([ts for _, ts in ts_pairs], pa.int64()).cast(UTC_MS)
    else:
        timestamp_types = pa.array([_TS_TYPES[t] for t in type_codes], pa.string())
        timestamps = pa.array([ts if t else None for t, ts in ts_pairs], UTC_MS)
    now = ingest_ts or datetime.now(UTC)
    return assemble(
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
        headers=headers_array(
            [m.headers() for m in messages], columns.raw_schema.field(columns.source_headers).type
        ),
        ingest_ts=pa.repeat(pa.scalar(now, UTC_US), n),
        ids=ids,
    )


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
        timestamp_types = constant(_TS_TYPES[first], pa.string(), n)
        timestamps = pa.Array.from_buffers(UTC_MS, n, [None, buf(ts)])
    else:
        timestamp_types = _TS_TYPE_NAMES.take(pa.array(codes))
        set_ = pa.array(codes != 0)
        timestamps = pc.if_else(
            set_, pa.Array.from_buffers(UTC_MS, n, [None, buf(ts)]), pa.scalar(None, UTC_MS)
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
    return assemble(
        columns,
        n,
        cluster=cluster,
        topics=constant(topic, pa.string(), n),
        partitions=constant(partition, pa.int32(), n),
        offsets=offsets,
        leader_epochs=pa.Array.from_buffers(pa.int32(), n, [opt(epoch_valid), buf(epoch)]),
        keys=keys,
        values=values,
        timestamps=timestamps,
        timestamp_types=timestamp_types,
        headers=headers,
        ingest_ts=pa.repeat(pa.scalar(now, UTC_US), n),
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
