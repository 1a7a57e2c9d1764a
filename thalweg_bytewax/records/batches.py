"""The columnar RawBatch: built from plain columns or ``RawRecord`` objects, and back.

A RawBatch is a ``pyarrow.RecordBatch`` with exactly the schema of
:attr:`MetadataColumns.raw_schema`: payload bytes with the envelope intact plus every
metadata column. Builders here turn plain columns (sample data, files) or ``RawRecord``
objects into one RawBatch and back, losing nothing: null and empty keys and values stay
distinct, headers keep their order, duplicate keys and null values. The builders from
Kafka messages are in :mod:`thalweg_bytewax.records.kafka_batches`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.records._assembly import assemble, headers_array
from thalweg_bytewax.records.ids import RECORD_ID_BYTES, record_id, record_ids_array
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.records.model import Header, Locator, OffsetSpan, RawRecord, TimestampType

__all__ = [
    "empty_raw_batch",
    "iter_headers",
    "offset_span",
    "raw_batch_from_columns",
    "raw_batch_from_records",
    "records_from_raw_batch",
]


def empty_raw_batch(columns: MetadataColumns = DEFAULT_COLUMNS) -> pa.RecordBatch:
    """A RawBatch with no rows."""
    return pa.RecordBatch.from_arrays(
        [pa.array([], f.type) for f in columns.raw_schema], schema=columns.raw_schema
    )


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
    return assemble(
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
        headers=headers_array(
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
    batch = assemble(
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
        headers=headers_array(
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
