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
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from typing_extensions import override

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState
from thalweg_bytewax.runtime.parts import stable_route
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option

from .._construct import construct
from ._args import check_config, check_interval, librdkafka_keyword
from ._config import DEFAULT_UNREACHABLE_TIMEOUT
from ._sink_partition import _KafkaSinkPartition
from ._sink_records import HEADER_LOCATOR, Locator, parse_locator
from ._sink_settings import (
    DEFAULT_DELIVERY_TIMEOUT,
    DEFAULT_QUEUE_MAX_BYTES,
    DEFAULT_QUEUE_MAX_MESSAGES,
    DEFAULT_SINK_METADATA_TIMEOUT,
    DEFAULT_SINK_SHARDS,
    Partitioner,
)
from .config import KafkaSinkConfig
from .stats import KafkaSinkStats

if TYPE_CHECKING:
    from thalweg_bytewax.codecs.base import Encoder
    from thalweg_bytewax.coverage.store import CoverageStore

__all__ = [
    "HEADER_LOCATOR",
    "KafkaSink",
    "KafkaSinkConfig",
    "KafkaSinkStats",
    "Locator",
    "Partitioner",
    "parse_locator",
]

logger = logging.getLogger(__name__)

_COMPONENT = KafkaSinkConfig.component


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

    The keywords other than ``encoder`` and ``coverage_store`` build a
    :class:`~thalweg_bytewax.connectors.kafka.KafkaSinkConfig` (:attr:`config`), the
    model a pipeline's ``[sinks.<name>]`` table with ``kind = "kafka"`` builds too; the
    partitions read only that model.

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
            compression); they override thalweg's defaults. Values whose key names a
            credential (``sasl.password``, ``ssl.key.password``, ...) are secrets:
            never shown, resolved only where a client is built.
        password: The SASL password (wins over ``librdkafka``'s ``sasl.password``), a
            secret; a ``${env:NAME}`` reference is resolved where a client is built.
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

    def __init__(  # noqa: PLR0913 - one documented knob each
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
        shards: int = DEFAULT_SINK_SHARDS,
        librdkafka: Mapping[str, Any] | None = None,
        password: str | SecretRef | None = None,
        add_config: Mapping[str, Any] | None = None,
        delivery_timeout: timedelta = DEFAULT_DELIVERY_TIMEOUT,
        metadata_timeout: timedelta = DEFAULT_SINK_METADATA_TIMEOUT,
        unreachable_timeout: timedelta = DEFAULT_UNREACHABLE_TIMEOUT,
        queue_max_messages: int = DEFAULT_QUEUE_MAX_MESSAGES,
        queue_max_bytes: int = DEFAULT_QUEUE_MAX_BYTES,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> None:
        librdkafka = librdkafka_keyword(librdkafka, add_config, component=_COMPONENT)
        # Python code means what it passes: a number is no duration here (TOML's seconds
        # are read by the model), and a map's keys must be property names.
        for name, value in (
            ("delivery_timeout", delivery_timeout),
            ("metadata_timeout", metadata_timeout),
            ("unreachable_timeout", unreachable_timeout),
        ):
            check_interval(value, name, component=_COMPONENT)
        settings = check_config(librdkafka, "librdkafka", component=_COMPONENT)
        config = KafkaSinkConfig.build(
            {
                "brokers": brokers,
                "topic": topic,
                "key": key,
                "headers": dict(headers) if isinstance(headers, Mapping) else headers or {},
                "partitioner": partitioner,
                "keep_source_headers": keep_source_headers,
                "transactional": transactional,
                "transactional_id": transactional_id,
                "shards": shards,
                "librdkafka": settings,
                "password": password,
                "delivery_timeout": delivery_timeout,
                "metadata_timeout": metadata_timeout,
                "unreachable_timeout": unreachable_timeout,
                "queue_max_messages": queue_max_messages,
                "queue_max_bytes": queue_max_bytes,
                "metadata_prefix": metadata_prefix,
            }
        )
        self._start(config, encoder, coverage_store)

    @classmethod
    def from_config(
        cls,
        config: KafkaSinkConfig,
        *,
        encoder: Encoder | None = None,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> KafkaSink:
        """The sink a :class:`KafkaSinkConfig` describes (a pipeline's ``[sinks.<name>]``).

        Args:
            config: The sink's settings.
            encoder: Encodes each batch to values; ``None`` sends the raw payload.
            coverage_store: Where to record each committed epoch's coverage.

        Raises:
            ConfigError: When ``config`` is not a ``KafkaSinkConfig``, or on a bad
                ``encoder``.
        """
        return construct(cls, cls._start, KafkaSinkConfig.checked(config), encoder, coverage_store)

    def _start(
        self,
        config: KafkaSinkConfig,
        encoder: Encoder | None,
        coverage_store: CoverageStore | str | os.PathLike[str] | None,
    ) -> None:
        if encoder is not None and not callable(getattr(encoder, "encode_batch", None)):
            msg = (
                f"{_COMPONENT}: `encoder` expected an encoder with `encode_batch(batch, *, "
                f"topic)` or None; got {type(encoder).__name__}"
            )
            raise ConfigError(msg)
        self._config = config
        self._encoder = encoder
        self.coverage_store = coverage_store_option(coverage_store)
        self.shards = config.shards
        self.columns = config.columns

    @property
    def config(self) -> KafkaSinkConfig:
        """The sink's settings, one frozen model (what its partitions read)."""
        return self._config

    @property
    def encoder(self) -> Encoder | None:
        """Encodes each batch to record values; ``None`` sends the raw payload."""
        return self._encoder

    @property
    def topic(self) -> str:
        """The output topic."""
        return self._config.topic

    def __repr__(self) -> str:
        # librdkafka and the password hold credentials: never shown.
        c = self._config
        return (
            f"KafkaSink(brokers={c.brokers!r}, topic={c.topic!r}, "
            f"partitioner={c.partitioner!r}, transactional={c.transactional!r}, "
            f"shards={c.shards!r})"
        )

    def producer_config(self, step_id: str, shard: int) -> dict[str, Any]:
        """The librdkafka producer settings of one shard, secrets resolved (of :attr:`config`)."""
        return self._config.producer_config(step_id, shard)

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
        return _KafkaSinkPartition(self._config, self._encoder, step_id, resume_state, shard)
