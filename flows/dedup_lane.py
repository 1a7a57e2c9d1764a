r"""The quality lane: deduplicated, validated orders plus their DLQ and audit lanes.

A bounded, deterministic source of decoded orders that behaves like a real topic
misbehaves: producers retry, so the same order (same ``order_id``) reappears at later
offsets, and every poll redelivers the tail of the previous one (same offsets, same
record ids). The flow removes both kinds of duplicate and enforces the orders contract::

    source ─ dedup by record id ─ dedup by natural key (window) ─ validate (quarantine)
                                                                   ├─ clean → <lake>/orders
                                                                   ├─ DLQ   → <lake>/dlq
                                                                   └─ audit → <lake>/audit

Every lane is a ``ParquetSink`` (exactly once across crashes); dedup and windowed state
live in Bytewax recovery. The rule registry of the rule set is written once to
``<lake>/rules/<ruleset_version>.parquet`` so the audit lane can be expanded per rule.
Configured by environment, so it runs unchanged under ``python -m bytewax.run``::

    THALWEG_DATA_DIR=lake python -m bytewax.run flows.dedup_lane -r recovery -s 1 -b 0

| variable | meaning | default |
|---|---|---|
| ``THALWEG_DATA_DIR`` | lake directory holding the four lanes | ``thalweg-data`` |
| ``THALWEG_CONTRACT`` | ODCS contract with the natural key | the bundled orders contract |
| ``THALWEG_DEDUP_WINDOW_S`` | how long a key is remembered (event time), seconds | ``3600`` |
| ``THALWEG_SAMPLE_PARTITIONS`` | source partitions | ``4`` |
| ``THALWEG_SAMPLE_PER_PARTITION`` | records per partition, retries included | ``5000`` |
| ``THALWEG_BATCH_SIZE`` | new records per poll | ``500`` |
| ``THALWEG_REDELIVER`` | records of the previous poll sent again with each poll | ``5`` |
| ``THALWEG_RETRY_RATE`` | share of records that are retries of an earlier order | ``0.2`` |
| ``THALWEG_MAX_RECORDS_PER_S`` | per-partition rate limit | unlimited |
| ``THALWEG_SHARDS`` | sink partitions per lane | ``16`` |

A bad value raises ``ConfigError`` naming the variable. Importing this module reads the
environment and the contract (fetched if ``THALWEG_CONTRACT`` is a URL) and writes
nothing; the lanes and the rule registry are written when the dataflow runs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource
from pydantic import Field
from typing_extensions import override

import thalweg_bytewax.operators as twg
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.rules import RuleRegistrySink
from thalweg_bytewax.contracts import ContractSpec, load_contract
from thalweg_bytewax.dev._generated import GeneratedPartition
from thalweg_bytewax.dev.samples import encode_order_avro, sample_order
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.flows import ORDERS_CONTRACT
from thalweg_bytewax.records.ids import record_ids
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

__all__ = [
    "DedupLaneSettings",
    "RetryingOrdersSource",
    "build_flow",
    "flow",
    "origins",
    "planned_order",
]

DEFAULT_CONTRACT = ORDERS_CONTRACT
_COLS = MetadataColumns()
_TOPIC = "orders"
# Offsets between an order and its retry: immediate, same poll, a few polls, many
# polls later (the retries that only dedup state can catch across a restart).
_RETRY_LAGS = (1, 3, 40, 250, 700)
# Event time of offset 0 and the spacing of records: replays see the same times.
_EVENT_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_EVENT_STEP = timedelta(milliseconds=10)


@lru_cache(maxsize=64)
def origins(seed: int, partition: int, count: int, retry_rate: float) -> tuple[int, ...]:
    """For each offset of a partition, the offset where its order first appeared.

    ``origins(...)[o] == o`` for a new order; a smaller value marks a producer retry of
    the order first published at that offset.
    """
    out: list[int] = []
    for offset in range(count):
        rng = random.Random(f"{seed}:{partition}:retry:{offset}")  # noqa: S311 - sample data
        if offset and rng.random() < retry_rate:
            lag = min(rng.choice(_RETRY_LAGS), offset)
            out.append(out[offset - lag])
        else:
            out.append(offset)
    return tuple(out)


def planned_order(seed: int, partition: int, origin: int) -> dict[str, Any]:
    """The order first published at ``origin``; a few are deliberately bad."""
    order = sample_order(random.Random(f"{seed}:{partition}:order:{origin}"))  # noqa: S311
    if origin % 97 == 13:
        order["status"] = "LOST"  # not an allowed value: DLQ, reason dq
    elif origin % 89 == 7:
        order["total"] = None  # required: DLQ, reason contract
    return order


def _payload(order: dict[str, Any]) -> bytes:
    # The bytes the record id is derived from: the Avro body where the order encodes.
    try:
        return encode_order_avro(order)
    except (ValueError, TypeError, KeyError, AttributeError):
        return repr(order).encode()


class _RetryingPartition(GeneratedPartition):
    def __init__(self, source: RetryingOrdersSource, partition: int, next_offset: int) -> None:
        super().__init__(
            encode_part(source.topic, partition),
            next_offset=next_offset,
            end=source.per_partition,
            batch_size=source.batch_size,
            records_per_s=source.records_per_s,
        )
        self._source = source
        self._partition = partition
        self._origins = origins(source.seed, partition, source.per_partition, source.retry_rate)

    @override
    def build(self, start: int, stop: int) -> pa.RecordBatch:
        # Redelivery: the tail of the previous poll comes again, as after a consumer
        # rebalance or a lost commit.
        first = max(0, start - self._source.redeliver)
        return self._source.batch(self._partition, list(range(first, stop)), self._origins)


class RetryingOrdersSource(FixedPartitionedSource[KeyedBatch, int]):
    """Decoded orders with producer retries and redeliveries, one part per partition.

    Each batch carries the contract's payload columns plus the locator columns,
    ``_twg_record_id`` (from the Avro bytes, so a redelivered record keeps its id and
    a retry at a new offset gets a new one) and ``_twg_source_timestamp`` (event time,
    increasing with the offset). Deterministic for a ``seed``; resume state is the next
    offset, as with Kafka.

    Args:
        contract: Gives the payload columns and their Arrow types.
        partitions: Number of partitions.
        per_partition: Records per partition, retries included.
        batch_size: New records per poll.
        redeliver: Records of the previous poll sent again with each poll.
        retry_rate: Share of records that are retries of an earlier order.
        seed: Sample seed.
        records_per_s: Optional per-partition rate limit.
        topic: Topic name to stamp.
    """

    def __init__(
        self,
        contract: ContractSpec,
        *,
        partitions: int = 4,
        per_partition: int = 5_000,
        batch_size: int = 500,
        redeliver: int = 5,
        retry_rate: float = 0.2,
        seed: int = 11,
        records_per_s: float | None = None,
        topic: str = _TOPIC,
    ) -> None:
        if partitions < 1 or per_partition < 0 or batch_size < 1 or redeliver < 0:
            msg = (
                "retrying orders source: expected partitions >= 1, per_partition >= 0, "
                f"batch_size >= 1 and redeliver >= 0; got {partitions}, {per_partition}, "
                f"{batch_size}, {redeliver}"
            )
            raise ConfigError(msg)
        self.partitions = partitions
        self.per_partition = per_partition
        self.batch_size = batch_size
        self.redeliver = redeliver
        self.retry_rate = retry_rate
        self.seed = seed
        self.records_per_s = records_per_s
        self.topic = topic
        payload = list(contract.arrow_schema())
        self.schema = pa.schema(
            [pa.field(f.name, f.type) for f in payload]
            + [_COLS.raw_schema.field(c) for c in _COLS.locator_columns()]
            + [_COLS.raw_schema.field(_COLS.source_timestamp)]
        )

    def batch(self, partition: int, offsets: Sequence[int], plan: Sequence[int]) -> pa.RecordBatch:
        """The decoded batch of ``offsets`` of ``partition``."""
        orders = [planned_order(self.seed, partition, plan[o]) for o in offsets]
        values = [_payload(o) for o in orders]
        data: dict[str, Any] = {
            f.name: [o[f.name] for o in orders]
            for f in self.schema
            if not _COLS.is_reserved(f.name)
        }
        data[_COLS.source_topic] = [self.topic] * len(offsets)
        data[_COLS.source_partition] = [partition] * len(offsets)
        data[_COLS.source_offset] = list(offsets)
        data[_COLS.record_id] = record_ids(None, self.topic, partition, offsets, values)
        data[_COLS.source_timestamp] = [_EVENT_EPOCH + _EVENT_STEP * o for o in offsets]
        return pa.RecordBatch.from_pydict(data, schema=self.schema)

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(self.topic, p) for p in range(self.partitions)])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> _RetryingPartition:
        _, partition = decode_part(for_part)
        return _RetryingPartition(self, partition, resume_state or 0)


class DedupLaneSettings(Settings):
    """Settings of the quality-lane flow, read from ``THALWEG_*`` variables by :meth:`load`."""

    component = "flows.dedup_lane"

    data_dir: Path = Path("thalweg-data")
    contract: str = str(DEFAULT_CONTRACT)
    dedup_window_s: float = Field(default=3600.0, gt=0)
    sample_partitions: int = Field(default=4, ge=1)
    sample_per_partition: int = Field(default=5_000, ge=0)
    batch_size: int = Field(default=500, ge=1)
    redeliver: int = Field(default=5, ge=0)
    retry_rate: float = Field(default=0.2, ge=0, le=1)
    max_records_per_s: float | None = Field(default=None, gt=0)
    shards: int = Field(default=16, ge=1)


def build_flow(settings: DedupLaneSettings) -> Dataflow:
    """Build the quality-lane dataflow.

    Args:
        settings: Flow settings (see :meth:`DedupLaneSettings.load`).

    Returns:
        The dataflow, ready for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.
    """
    lake = settings.data_dir
    contract = load_contract(settings.contract)
    window = timedelta(seconds=settings.dedup_window_s)
    shards = settings.shards
    source = RetryingOrdersSource(
        contract,
        partitions=settings.sample_partitions,
        per_partition=settings.sample_per_partition,
        batch_size=settings.batch_size,
        redeliver=settings.redeliver,
        retry_rate=settings.retry_rate,
        records_per_s=settings.max_records_per_s,
    )

    flow = Dataflow("dedup_lane")
    orders = op.input("orders", flow, source)
    once = twg.dedup("dedup_redelivery", orders, by="record_id", window=window)
    unique = twg.dedup("dedup_retries", once, by="natural_key", window=window, contract=contract)
    out = twg.validate("validate", unique, contract, mode="quarantine")
    op.output("orders_lane", out.clean, ParquetSink(lake / "orders", shards=shards))
    op.output("dlq_lane", out.rejected, ParquetSink(lake / "dlq", shards=shards))
    op.output("rule_registry", out.audit, RuleRegistrySink(lake / "rules", out.ruleset))
    op.output("audit_lane", out.audit, ParquetSink(lake / "audit", shards=shards))
    return flow


flow = build_flow(DedupLaneSettings.load())
