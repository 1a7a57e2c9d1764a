"""Kafka output: keyed Arrow batches to a topic, each input record exactly once across crashes.

``KafkaSink`` is a ``FixedPartitionedSink`` of epoch-durable partitions: within an epoch
records are produced asynchronously (an idempotent producer, a bounded local queue);
when Bytewax closes the epoch, ``snapshot()`` flushes and checks every delivery report
*before* it returns, so the source position Bytewax records never leads what the topic
holds. Every record carries its source locator and record id in one header,
``_twg.locator`` (:func:`parse_locator` reads it); on resume each sink partition reads
its output partitions back from the end offsets its last snapshot stored and skips
replayed rows that an earlier attempt already wrote — the same reconciliation the
Parquet lane does from its file names. With ``transactional=True`` each epoch is also
one Kafka transaction, for ``read_committed`` consumers of clusters that implement
transactions fully.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import override

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, metadata_columns
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState
from thalweg_bytewax.runtime.parts import stable_route
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option

from ._args import (
    check_bool,
    check_config,
    check_interval,
    check_names,
    check_positive_int,
)
from ._config import BOOTSTRAP_SERVERS, DEFAULT_UNREACHABLE_TIMEOUT, GROUP_ID, LOG_LEVEL
from ._sink_partition import _KafkaSinkPartition
from ._sink_records import HEADER_LOCATOR, RESERVED_HEADER_PREFIX, Locator, parse_locator
from .stats import KafkaSinkStats

if TYPE_CHECKING:
    from thalweg_bytewax.codecs.base import Encoder
    from thalweg_bytewax.coverage.store import CoverageStore

__all__ = [
    "HEADER_LOCATOR",
    "KafkaSink",
    "KafkaSinkStats",
    "Locator",
    "Partitioner",
    "parse_locator",
]

logger = logging.getLogger(__name__)

Partitioner = Literal["key", "source"]
"""How records find their output partition: by key (murmur2, as Java clients do) or the
partition number of their source partition."""

_COMPONENT = "kafka sink"

# librdkafka producer property names, in one place.
ENABLE_IDEMPOTENCE = "enable.idempotence"
ACKS = "acks"
PARTITIONER = "partitioner"
DELIVERY_REPORT_ONLY_ERROR = "delivery.report.only.error"
MESSAGE_TIMEOUT_MS = "message.timeout.ms"
QUEUE_MAX_MESSAGES = "queue.buffering.max.messages"
QUEUE_MAX_KBYTES = "queue.buffering.max.kbytes"
LINGER_MS = "linger.ms"
TRANSACTIONAL_ID = "transactional.id"
TRANSACTION_TIMEOUT_MS = "transaction.timeout.ms"
ISOLATION_LEVEL = "isolation.level"
ENABLE_PARTITION_EOF = "enable.partition.eof"

# The local queue bounds the sink's memory: librdkafka refuses more (BufferError) and
# the sink waits for deliveries. 64 MiB / 100k records keeps several 10k-record polls
# in flight (measured on benchmarks/kafka_sink.py, docs/benchmarks.md "Kafka sink").
DEFAULT_QUEUE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_QUEUE_MAX_MESSAGES = 100_000
# Java clients' partitioner: a key lands where a Java producer would put it.
_MURMUR2 = "murmur2_random"


class KafkaSink(ShardedEpochSink[_KafkaSinkPartition]):
    """Write keyed Arrow batches (or raw records) to a Kafka topic, each record exactly once.

    Source topic-partitions are the unit of parallelism: each is written by one sink
    partition (one idempotent producer per shard). Exactly-once via reconciliation:
    every epoch is flushed and every delivery report checked before its snapshot
    returns, every record carries its source locator and record id in a header, and on
    resume replayed rows that an earlier attempt already wrote are skipped (read back
    from the topic's tail). A plain consumer of the topic sees every input record once.
    With ``transactional=True`` each epoch is also one Kafka transaction, so
    ``read_committed`` consumers never see an epoch that failed.

    Each batch needs the locator columns (``_twg_source_topic``, ``_source_partition``,
    ``_source_offset``; ``_twg_record_id`` to check replays by id). The value is the
    encoder's output, or without an encoder the raw payload ``_twg_source_value``
    (with the raw key and headers: a mirror).

    Example::

        flow = Dataflow("mirror")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("out", raw, KafkaSink(["localhost:9092"], "orders-copy"))

    Args:
        brokers: Bootstrap servers, as a list or a comma-separated string.
        topic: The output topic (it must exist, or the cluster must auto-create it).
        encoder: Encodes each batch to values (``AvroEncoder``, ``ProtobufEncoder``,
            ``JsonEncoder``, ``BytesEncoder``, or the DLQ's ``DlqEncoder``); ``None``
            sends the raw ``<prefix>source_value`` bytes.
        key: The column holding record keys (binary, string or integer); default the
            raw ``<prefix>source_key`` where the batch has it, else no key.
        headers: Extra headers from columns: header name -> column name.
        partitioner: ``"key"`` (murmur2 of the key, Java-compatible; null keys spread
            at random) or ``"source"`` (the record's source partition number).
        keep_source_headers: Without an encoder, copy the raw record's headers
            (``<prefix>source_headers``) after the locator headers.
        transactional: One Kafka transaction per epoch and shard.
        transactional_id: Prefix of the transactional ids (``<prefix>-<shard>``);
            default ``thalweg-<topic>-<step id>``. Keep it stable across restarts.
        shards: Number of sink partitions the source partitions spread over.
        librdkafka: librdkafka producer settings passed through (SASL/SSL,
            compression); they override thalweg's defaults and are never shown.
        add_config: The old name of ``librdkafka`` (deprecated; warns).
        delivery_timeout: How long an epoch's records may take to be acknowledged, and
            how long a full local queue may block, before the sink fails loudly
            (``unreachable_timeout`` is added while the brokers are unreachable).
        metadata_timeout: How long one metadata request may take.
        unreachable_timeout: How long the sink waits for brokers that are unreachable
            or partitions without a leader (a broker restarting) before the epoch fails
            with ``SinkTransientError``: requests answered with a transient error are
            retried until then, records may wait this long on top of
            ``delivery_timeout`` (librdkafka cannot tell a slow broker from a gone
            one), and the read-back on resume may take this long (with
            ``transactional=True``, its wait for another shard's transaction left open
            by a killed run up to ``transaction.timeout.ms`` + 10 s when that is
            longer). Default 60 s, as the source's.
        queue_max_messages: Most records waiting in the producer's local queue.
        queue_max_bytes: Most bytes waiting in the producer's local queue.
        metadata_prefix: Prefix of the metadata columns.
        coverage_store: Where to record each committed epoch's coverage for the flow
            (beside the raw lane), under the output's step id: a
            :class:`~thalweg_bytewax.coverage.store.CoverageStore`, a path (SQLite) or a
            ``postgresql://`` URL. None records nothing. ``thalweg coverage`` and
            ``thalweg recover`` read it.

    Raises:
        ConfigError: On an invalid argument.
    """

    def __init__(
        self,
        brokers: Sequence[str] | str,
        topic: str,
        *,
        encoder: Encoder | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
        partitioner: Partitioner = "key",
        keep_source_headers: bool = True,
        transactional: bool = False,
        transactional_id: str | None = None,
        shards: int = 16,
        librdkafka: Mapping[str, Any] | None = None,
        add_config: Mapping[str, Any] | None = None,
        delivery_timeout: timedelta = timedelta(seconds=30),
        metadata_timeout: timedelta = timedelta(seconds=10),
        unreachable_timeout: timedelta = DEFAULT_UNREACHABLE_TIMEOUT,
        queue_max_messages: int = DEFAULT_QUEUE_MAX_MESSAGES,
        queue_max_bytes: int = DEFAULT_QUEUE_MAX_BYTES,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> None:
        if add_config is not None:
            warnings.warn(
                f"{_COMPONENT}: `add_config` is deprecated; pass `librdkafka` (the old name "
                "goes in the next release)",
                DeprecationWarning,
                stacklevel=2,
            )
            if librdkafka is not None:
                msg = f"{_COMPONENT}: got `librdkafka` and its old name `add_config`; keep one"
                raise ConfigError(msg)
            librdkafka = add_config
        self.brokers = check_names(brokers, "brokers", component=_COMPONENT)
        self.coverage_store = coverage_store_option(coverage_store)
        if not isinstance(topic, str) or not topic or ":" in topic:
            msg = (
                f"{_COMPONENT}: `topic` expected a non-empty topic name without ':'; "
                f"got {topic!r}"
            )
            raise ConfigError(msg)
        self.topic = topic
        if encoder is not None and not callable(getattr(encoder, "encode_batch", None)):
            msg = (
                f"{_COMPONENT}: `encoder` expected an encoder with `encode_batch(batch, *, "
                f"topic)` or None; got {type(encoder).__name__}"
            )
            raise ConfigError(msg)
        self.encoder = encoder
        if key is not None and (not isinstance(key, str) or not key):
            msg = f"{_COMPONENT}: `key` expected a column name or None; got {key!r}"
            raise ConfigError(msg)
        self.key = key
        headers = dict(headers or {})
        for name, col in headers.items():
            if not isinstance(name, str) or not isinstance(col, str) or not name or not col:
                msg = (
                    f"{_COMPONENT}: `headers` expected header names mapped to column "
                    f"names; got {name!r}: {col!r}"
                )
                raise ConfigError(msg)
            if name.startswith(RESERVED_HEADER_PREFIX):
                msg = (
                    f"{_COMPONENT}: `headers` names `{name}`, which the sink writes itself "
                    f"(`{RESERVED_HEADER_PREFIX}*`); expected another header name"
                )
                raise ConfigError(msg)
        self.headers = headers
        if partitioner not in ("key", "source"):
            msg = f"{_COMPONENT}: `partitioner` expected 'key' or 'source'; got {partitioner!r}"
            raise ConfigError(msg)
        self.partitioner: Partitioner = partitioner
        self.keep_source_headers = check_bool(
            keep_source_headers, "keep_source_headers", component=_COMPONENT
        )
        self.transactional = check_bool(transactional, "transactional", component=_COMPONENT)
        if transactional_id is not None and (
            not isinstance(transactional_id, str) or not transactional_id
        ):
            msg = (
                f"{_COMPONENT}: `transactional_id` expected a non-empty string or None; "
                f"got {transactional_id!r}"
            )
            raise ConfigError(msg)
        self.transactional_id = transactional_id
        self.shards = check_positive_int(shards, "shards", component=_COMPONENT)
        self.librdkafka = check_config(librdkafka, "librdkafka", component=_COMPONENT)
        self.delivery_timeout_s = check_interval(
            delivery_timeout, "delivery_timeout", component=_COMPONENT
        )
        self.metadata_timeout_s = check_interval(
            metadata_timeout, "metadata_timeout", component=_COMPONENT
        )
        self.unreachable_timeout_s = check_interval(
            unreachable_timeout, "unreachable_timeout", component=_COMPONENT
        )
        self.queue_max_messages = check_positive_int(
            queue_max_messages, "queue_max_messages", component=_COMPONENT
        )
        self.queue_max_bytes = check_positive_int(
            queue_max_bytes, "queue_max_bytes", component=_COMPONENT
        )
        self.columns = metadata_columns(metadata_prefix, _COMPONENT)

    def __repr__(self) -> str:
        # librdkafka may hold credentials: never shown.
        return (
            f"KafkaSink(brokers={self.brokers!r}, topic={self.topic!r}, "
            f"partitioner={self.partitioner!r}, transactional={self.transactional!r}, "
            f"shards={self.shards!r})"
        )

    @property
    def acknowledge_s(self) -> float:
        """How long a record may wait for its acknowledgement, in seconds.

        ``delivery_timeout`` plus ``unreachable_timeout``: a broker restarting holds
        records that long.
        """
        return self.delivery_timeout_s + self.unreachable_timeout_s

    @property
    def wait_s(self) -> float:
        """How long requests answered with a transient error are retried."""
        return max(self.metadata_timeout_s, self.unreachable_timeout_s)

    def producer_config(self, step_id: str, shard: int) -> dict[str, Any]:
        """The librdkafka producer settings of one shard: our defaults, then ``librdkafka``."""
        config: dict[str, Any] = {
            BOOTSTRAP_SERVERS: ",".join(self.brokers),
            ENABLE_IDEMPOTENCE: True,
            ACKS: "all",
            PARTITIONER: _MURMUR2,
            # Success reports would cost a Python callback per record; failures are
            # what the epoch's check needs (flush() returning 0 means the rest landed).
            DELIVERY_REPORT_ONLY_ERROR: True,
            MESSAGE_TIMEOUT_MS: int(self.acknowledge_s * 1000),
            QUEUE_MAX_MESSAGES: self.queue_max_messages,
            QUEUE_MAX_KBYTES: max(1, self.queue_max_bytes // 1024),
            LINGER_MS: 5,
            LOG_LEVEL: 3,
        }
        if self.transactional:
            prefix = self.transactional_id or f"thalweg-{self.topic}-{step_id}"
            config[TRANSACTIONAL_ID] = f"{prefix}-{shard}"
            # A transaction spans at most one epoch plus its flush (librdkafka refuses a
            # message timeout longer than the transaction's).
            config[TRANSACTION_TIMEOUT_MS] = max(
                60_000, int(self.delivery_timeout_s * 2000), int(self.acknowledge_s * 1000)
            )
        config.update(self.librdkafka)
        return config

    def reader_config(self) -> dict[str, Any]:
        """The librdkafka consumer settings used to read the topic back on resume."""
        config: dict[str, Any] = {
            BOOTSTRAP_SERVERS: ",".join(self.brokers),
            GROUP_ID: f"thalweg-unused-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            ENABLE_PARTITION_EOF: True,
            ISOLATION_LEVEL: "read_committed" if self.transactional else "read_uncommitted",
            LOG_LEVEL: 3,
        }
        # Security settings apply to the reader too; producer-only ones are dropped.
        for name, value in self.librdkafka.items():
            if name.startswith(("security.", "sasl.", "ssl.", "client.", "socket.")):
                config[name] = value
        return config

    @override
    def part_fn(self, item_key: str) -> int:
        """Route by :func:`~thalweg_bytewax.runtime.parts.stable_route` of the key.

        Not the co-located routing of the other sinks: a shard reads back what it wrote
        from where its own last snapshot ended in each output partition, which finds a
        source partition's records only while the same shard owns it in every run.
        """
        return stable_route(item_key, self.shards)

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _KafkaSinkPartition:
        return _KafkaSinkPartition(self, step_id, resume_state, shard)
