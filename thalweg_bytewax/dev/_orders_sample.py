"""The embedded default of ``flows.orders``: a partitioned, bounded, deterministic source.

It emits exactly the RawBatch shape a real ``orders`` topic produces — keys, headers,
CreateTime timestamps and Confluent-framed Avro payloads — so everything after the
source is the same code as with Kafka. A few records are deliberately bad, so the
dead-letter path has work to do: some cannot be decoded (a corrupt body, an unknown
schema id, a tombstone) and some decode but break the orders contract (a negative
total, a lower-case currency, customer id 0, an over-long coupon).

Orders are placed as on a real shop: order ``i`` is created ``i`` × 100 ms after
:data:`SAMPLE_START`, give or take up to two seconds, so event time (``created_at``, also
the record's CreateTime) rises with the offset of each partition, a little out of order,
and the default 20,000 orders span about 33 minutes of event time.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax.dev import samples
from thalweg_bytewax.dev._generated import GeneratedPartition
from thalweg_bytewax.dev._sample_columns import SAMPLE_START
from thalweg_bytewax.dev.samples import encode_order_avro, order_key
from thalweg_bytewax.records.batches import raw_batch_from_columns
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

__all__ = [
    "SAMPLE_CLUSTER",
    "SAMPLE_START",
    "SampleOrdersSource",
    "sample_order_at",
    "sample_payload_at",
]

SAMPLE_CLUSTER = "embedded-sample"
"""The cluster id stamped on sample records."""

_HEADERS = (("content-type", b"application/vnd.confluent.avro"), ("producer", b"thalweg-sample"))


def _contract_violation(index: int, order: dict[str, Any]) -> dict[str, Any]:
    """Every 1000th order (from the 250th) decodes fine but breaks a contract rule."""
    if index % 1000 != 250:
        return order
    kind = (index // 1000) % 4
    if kind == 0:
        return {**order, "total": Decimal("-12.50")}  # total_min: total >= 0
    if kind == 1:
        return {**order, "currency": "eur"}  # currency pattern ^[A-Z]{3}$
    if kind == 2:
        return {**order, "customer_id": 0}  # customer_id minimum 1
    return {**order, "coupon": "X" * 40}  # coupon maxLength 32


def sample_order_at(seed: int, index: int) -> dict[str, Any]:
    """Order number ``index`` of the embedded sample, contract violations included."""
    return _contract_violation(index, samples.sample_order_at(seed, index))


def sample_payload_at(seed: int, index: int) -> bytes | None:
    """The payload of order ``index``: Confluent-framed Avro, or deliberately undecodable."""
    return _bad_payload(index, encode_order_avro(sample_order_at(seed, index)))


def _bad_payload(index: int, good: bytes) -> bytes | None:
    """Every 1000th record (from the 500th) is bad, in a rotating way."""
    if index % 1000 != 500:
        return good
    kind = (index // 1000) % 3
    if kind == 0:
        return good[:5] + b"\xff\xff\xff"  # corrupt Avro body
    if kind == 1:
        return b"\x00" + struct.pack(">I", 99) + good[5:]  # unknown schema id
    return None  # tombstone


class _SamplePartition(GeneratedPartition):
    def __init__(self, source: SampleOrdersSource, partition: int, next_offset: int) -> None:
        super().__init__(
            encode_part(source.topic, partition),
            next_offset=next_offset,
            end=_partition_count(source.count, source.partitions, partition),
            batch_size=source.batch_size,
            records_per_s=source.records_per_s,
        )
        self._source = source
        self._partition = partition

    @override
    def build(self, start: int, stop: int) -> pa.RecordBatch:
        src = self._source
        offsets = list(range(start, stop))
        # Global order numbers; the good orders encoded columnar, the few bad ones after.
        first = start * src.partitions + self._partition
        indexes = range(first, stop * src.partitions + self._partition, src.partitions)
        good, keys, stamps = samples.sample_orders_at(indexes, seed=src.seed)
        values: list[bytes | None] = list(good)
        for j, index in enumerate(indexes):
            if index % 1000 == 250:  # noqa: PLR2004 - decodes, breaks the contract
                order = sample_order_at(src.seed, index)
                keys[j], values[j] = order_key(order), encode_order_avro(order)
            elif index % 1000 == 500:  # noqa: PLR2004 - does not decode
                values[j] = _bad_payload(index, good[j])
        return raw_batch_from_columns(
            topic=src.topic,
            partition=self._partition,
            offsets=offsets,
            keys=keys,
            values=values,
            timestamps_ms=stamps,
            headers=[_HEADERS] * len(offsets),
            cluster=SAMPLE_CLUSTER,
            columns=src.columns,
        )


def _partition_count(total: int, partitions: int, partition: int) -> int:
    return total // partitions + (1 if partition < total % partitions else 0)


class SampleOrdersSource(FixedPartitionedSource[KeyedBatch, int]):
    """Deterministic sample orders as keyed RawBatches, one partition per topic-partition.

    Order ``i`` lands in partition ``i % partitions`` at offset ``i // partitions``; the
    same ``seed`` gives the same records in every run and process. Resume state is the
    next offset, as with Kafka.

    Args:
        count: Total number of orders across partitions.
        topic: The topic name to stamp.
        partitions: Number of partitions.
        batch_size: Records per emitted batch.
        seed: Sample seed.
        records_per_s: Optional per-partition rate limit (to watch a flow work).
        metadata_prefix: Prefix of the metadata columns.
    """

    def __init__(
        self,
        count: int = 20_000,
        *,
        topic: str = "orders",
        partitions: int = 4,
        batch_size: int = 2_000,
        seed: int = 7,
        records_per_s: float | None = None,
        metadata_prefix: str = "_twg_",
    ) -> None:
        self.count = count
        self.topic = topic
        self.partitions = partitions
        self.batch_size = batch_size
        self.seed = seed
        self.records_per_s = records_per_s
        self.columns = MetadataColumns(metadata_prefix)

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(self.topic, p) for p in range(self.partitions)])

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _SamplePartition:
        crossings.note_readers([for_part])
        _, partition = decode_part(for_part)
        return _SamplePartition(self, partition, resume_state or 0)
