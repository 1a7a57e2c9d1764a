"""``KafkaSinkConfig``: every setting of a ``KafkaSink``, frozen.

Built from the sink's keywords, from a pipeline's ``[sinks.<name>]`` table with
``kind = "kafka"``, and read whole by the sink's partitions; the same spellings as the
source (``brokers``, ``librdkafka``, ``password``), the same secrets, resolved only by
:meth:`KafkaSinkConfig.producer_config` and :meth:`KafkaSinkConfig.reader_config`.
Import it from :mod:`thalweg_bytewax.connectors.kafka.config` (or the package).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from thalweg_bytewax.config import PositiveDuration, SecretRef
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

from ._config import (
    BOOTSTRAP_SERVERS,
    DEFAULT_UNREACHABLE_TIMEOUT,
    GROUP_ID,
    ISOLATION_LEVEL,
    LOG_LEVEL,
)
from ._shared_config import KafkaClientConfig, KafkaSettings, Names, resolved_settings
from ._sink_settings import (
    ACKS,
    DEFAULT_DELIVERY_TIMEOUT,
    DEFAULT_QUEUE_MAX_BYTES,
    DEFAULT_QUEUE_MAX_MESSAGES,
    DEFAULT_SINK_METADATA_TIMEOUT,
    DEFAULT_SINK_SHARDS,
    DELIVERY_REPORT_ONLY_ERROR,
    ENABLE_IDEMPOTENCE,
    ENABLE_PARTITION_EOF,
    LINGER_MS,
    MESSAGE_TIMEOUT_MS,
    MIN_TRANSACTION_TIMEOUT_MS,
    MURMUR2,
    PARTITIONER,
    QUEUE_MAX_KBYTES,
    QUEUE_MAX_MESSAGES,
    READER_SETTING_PREFIXES,
    RESERVED_HEADER_PREFIX,
    TRANSACTION_TIMEOUT_MS,
    TRANSACTIONAL_ID,
    Partitioner,
)

__all__ = ["KafkaSinkConfig"]


def _topic_name(topic: str) -> str:
    if not topic or ":" in topic:
        # ":" separates topic and partition in partition keys; Kafka refuses it anyway.
        msg = f"expected a non-empty topic name without ':'; got {topic!r}"
        raise ValueError(msg)
    return topic


def _header_names(headers: dict[str, str]) -> dict[str, str]:
    for name, column in headers.items():
        if not name or not column:
            msg = f"expected header names mapped to column names; got {name!r}: {column!r}"
            raise ValueError(msg)
        if name.startswith(RESERVED_HEADER_PREFIX):
            msg = (
                f"names `{name}`, which the sink writes itself (`{RESERVED_HEADER_PREFIX}*`); "
                "expected another header name"
            )
            raise ValueError(msg)
    return headers


class KafkaSinkConfig(KafkaClientConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.kafka.KafkaSink`.

    Build it from keywords (``KafkaSinkConfig.build({"brokers": "b:9092", "topic": "out"})``),
    load it as a pipeline's ``[sinks.<name>]`` (``kind = "kafka"``), or let ``KafkaSink``
    build it from its own keywords; ``KafkaSink.from_config`` takes it whole. The
    encoder and the coverage store are objects, arguments of the sink, not settings.

    Example:
        >>> cfg = KafkaSinkConfig.build(
        ...     {"brokers": "b:9092", "topic": "out", "password": "${env:KAFKA_PASSWORD}"}
        ... )
        >>> cfg.brokers, cfg.password, cfg.delivery_timeout
        (['b:9092'], SecretRef('${env:KAFKA_PASSWORD}'), datetime.timedelta(seconds=30))
    """

    component: ClassVar[str] = "kafka sink"
    old_names: ClassVar[Mapping[str, str]] = {"bootstrap_servers": "brokers"}

    kind: Literal["kafka"] = "kafka"
    """The sink kind, as a pipeline's `[sinks.<name>]` table names it."""
    brokers: Names
    """The bootstrap servers, `host:port`, as a list or one comma-separated string
    (`bootstrap_servers` is its old name)."""
    topic: Annotated[str, AfterValidator(_topic_name)]
    """The output topic (it must exist, or the cluster must auto-create it)."""
    key: Annotated[str, Field(min_length=1)] | None = None
    """The column holding record keys (binary, string or integer); unset = the raw
    `<prefix>source_key` where a batch has it, else no key."""
    headers: Annotated[dict[str, str], AfterValidator(_header_names)] = Field(default_factory=dict)
    """Extra headers from columns: header name = column name (not `_twg.*`, the sink's
    own)."""
    partitioner: Partitioner = "key"
    """`key` (murmur2 of the key, as Java clients; null keys spread at random) or
    `source` (the record's source partition number)."""
    keep_source_headers: bool = True
    """Without an encoder, copy the raw record's headers after the locator header."""
    transactional: bool = False
    """One Kafka transaction per epoch and shard (for `read_committed` readers)."""
    transactional_id: Annotated[str, Field(min_length=1)] | None = None
    """Prefix of the transactional ids (`<prefix>-<shard>`); unset =
    `thalweg-<topic>-<step id>`. Keep it stable across restarts."""
    shards: int = Field(default=DEFAULT_SINK_SHARDS, ge=1)
    """Sink partitions the source partitions spread over."""
    librdkafka: KafkaSettings = Field(default_factory=dict)
    """librdkafka producer properties passed through (SASL, SSL, compression); they win
    over thalweg's. A value whose key names a credential (`sasl.password`,
    `ssl.key.password`, `sasl.oauthbearer.client.secret`, ...) is a secret: write a
    reference (`${env:KAFKA_PASSWORD}`); it is never shown."""
    password: SecretRef | None = None
    """The SASL password (librdkafka's `sasl.password`, which it wins over), a secret:
    write a reference (`${env:KAFKA_PASSWORD}`); it is resolved only when a client is
    built."""
    delivery_timeout: PositiveDuration = DEFAULT_DELIVERY_TIMEOUT
    """How long an epoch's records may take to be acknowledged, and a full local queue
    may block, before the epoch fails (`unreachable_timeout` is added while the brokers
    are unreachable)."""
    metadata_timeout: PositiveDuration = DEFAULT_SINK_METADATA_TIMEOUT
    """How long one metadata request may take."""
    unreachable_timeout: PositiveDuration = DEFAULT_UNREACHABLE_TIMEOUT
    """How long the sink waits for unreachable brokers or leaderless partitions before
    the epoch fails with `SinkTransientError`."""
    queue_max_messages: int = Field(default=DEFAULT_QUEUE_MAX_MESSAGES, ge=1)
    """Most records waiting in the producer's local queue."""
    queue_max_bytes: int = Field(default=DEFAULT_QUEUE_MAX_BYTES, ge=1)
    """Most bytes waiting in the producer's local queue."""
    metadata_prefix: str = DEFAULT_PREFIX
    """The prefix of the metadata columns."""

    @property
    def delivery_timeout_s(self) -> float:
        """:attr:`delivery_timeout` in seconds, as the client takes it."""
        return self.delivery_timeout.total_seconds()

    @property
    def acknowledge_s(self) -> float:
        """How long a record may wait for its acknowledgement, in seconds.

        :attr:`delivery_timeout` plus :attr:`unreachable_timeout`: a broker restarting
        holds records that long.
        """
        return (self.delivery_timeout + self.unreachable_timeout).total_seconds()

    @property
    def wait_s(self) -> float:
        """How long requests answered with a transient error are retried, in seconds."""
        return max(self.metadata_timeout, self.unreachable_timeout).total_seconds()

    def producer_config(self, step_id: str, shard: int) -> dict[str, Any]:
        """The librdkafka producer settings of one shard, secrets resolved.

        thalweg's defaults, then :attr:`librdkafka` (and :attr:`password`), which win.
        Call it where a client is built, never to show.

        Raises:
            ConfigError: Naming a secret reference that does not resolve.
        """
        config: dict[str, Any] = {
            BOOTSTRAP_SERVERS: ",".join(self.brokers),
            ENABLE_IDEMPOTENCE: True,
            ACKS: "all",
            PARTITIONER: MURMUR2,
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
                MIN_TRANSACTION_TIMEOUT_MS,
                int(self.delivery_timeout_s * 2000),
                int(self.acknowledge_s * 1000),
            )
        config.update(resolved_settings(self.librdkafka, self.password))
        return config

    def reader_config(self) -> dict[str, Any]:
        """The librdkafka consumer settings that read the topic back on resume.

        Security settings of :attr:`librdkafka` apply to the reader too, resolved;
        producer-only ones are left out.

        Raises:
            ConfigError: Naming a secret reference that does not resolve.
        """
        config: dict[str, Any] = {
            BOOTSTRAP_SERVERS: ",".join(self.brokers),
            GROUP_ID: f"thalweg-unused-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            ENABLE_PARTITION_EOF: True,
            ISOLATION_LEVEL: "read_committed" if self.transactional else "read_uncommitted",
            LOG_LEVEL: 3,
        }
        for name, value in resolved_settings(self.librdkafka, self.password).items():
            if name.startswith(READER_SETTING_PREFIXES):
                config[name] = value
        return config
