"""``KafkaSourceConfig`` and ``KafkaSinkConfig``: every setting of a Kafka connector, frozen.

The same object comes from a ``KafkaSource``'s keywords (checked by name, strictly: a
``timedelta`` for a duration, ``True``/``False`` for a flag), from a pipeline's
``[source]`` table with ``kind = "kafka"``, and from ``THALWEG_SOURCE__*`` variables and
``--set source.*`` overrides. Partitions read only this object.

One spelling per setting: ``brokers`` (``bootstrap_servers`` in a TOML file is its old
name), ``librdkafka`` (the Python keyword ``add_config`` is its old name), durations as
``timedelta`` (seconds or ISO 8601 in TOML). Credentials are secrets: ``password`` (the
SASL password) and every ``librdkafka`` entry whose key names one (``sasl.password``,
``ssl.key.password``, ``sasl.oauthbearer.client.secret``, ...) are
:class:`~thalweg_bytewax.config.SecretRef` values, shown as their references or ``***``
and resolved only by :meth:`KafkaSourceConfig.consumer_config`, where a client is built.

:class:`KafkaSinkConfig` is the same for a ``KafkaSink``: built from its keywords, from a
pipeline's ``[sinks.<name>]`` table with ``kind = "kafka"``, and read whole by its
partitions; the same spellings (``brokers``, ``librdkafka``, ``password``), the same
secrets, resolved only by :meth:`KafkaSinkConfig.producer_config` and
:meth:`KafkaSinkConfig.reader_config`. It lives in a module of its own (``_sink_config``)
and is imported from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, AwareDatetime, Field

from thalweg_bytewax.config import (
    PositiveDuration,
    SecretRef,
)
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

from ._config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_FETCH_WAIT_MAX_MS,
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_PARTITION_FETCH_BYTES,
    DEFAULT_PARTITION_CHECK_INTERVAL,
    DEFAULT_PREFETCH_BUDGET,
    DEFAULT_UNREACHABLE_TIMEOUT,
    FETCH_WAIT_MAX_MS,
    ISOLATION_LEVEL,
    MAX_PARTITION_FETCH_BYTES,
    QUEUED_MAX_MESSAGES_KBYTES,
    QUEUED_MIN_MESSAGES,
    IsolationLevel,
    consumer_config,
    partition_prefetch_kbytes,
    partition_prefetch_records,
)
from ._shared_config import KafkaClientConfig, KafkaSettings, Names, resolved_settings
from ._sink_config import KafkaSinkConfig

__all__ = [
    "DEFAULT_METADATA_TIMEOUT",
    "KafkaSettings",
    "KafkaSinkConfig",
    "KafkaSourceConfig",
]

DEFAULT_METADATA_TIMEOUT = timedelta(seconds=10)
"""How long a source waits for the brokers' metadata before it fails."""


def _no_colon(topics: list[str]) -> list[str]:
    for topic in topics:
        if ":" in topic:
            # ":" separates topic and partition in partition keys; Kafka refuses it anyway.
            msg = f"expected topic names without ':' (Kafka refuses them); got {topic!r}"
            raise ValueError(msg)
    return topics


def _finite(rate: float | None) -> float | None:
    if rate is not None and not math.isfinite(rate):
        msg = f"expected a finite number of records per second; got {rate!r}"
        raise ValueError(msg)
    return rate


class KafkaSourceConfig(KafkaClientConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.kafka.KafkaSource`.

    Build it from keywords (``KafkaSourceConfig(brokers=["b:9092"], topics=["orders"])``),
    load it as a pipeline's ``[source]`` (``kind = "kafka"``), or let ``KafkaSource``
    build it from its own keywords; ``KafkaSource.from_config`` takes it whole.
    """

    component: ClassVar[str] = "kafka source"
    old_names: ClassVar[Mapping[str, str]] = {"bootstrap_servers": "brokers"}

    kind: Literal["kafka"] = "kafka"
    """The source kind, as a pipeline's `[source]` table names it."""
    brokers: Names
    """The bootstrap servers, `host:port`, as a list or one comma-separated string
    (`bootstrap_servers` is its old name)."""
    topics: Annotated[Names, AfterValidator(_no_colon)] = Field(default_factory=lambda: ["orders"])
    """The topics to read, every partition of each."""
    tail: bool = True
    """Follow new records (true) or stop at the end offsets seen when a partition starts."""
    starting_offset: Literal["earliest", "latest"] | Annotated[int, Field(ge=0)] | AwareDatetime = (
        "earliest"
    )
    """Where a partition with no stored position starts: `earliest`, `latest`, an offset
    or a timezone-aware time (the first record at or after it)."""
    librdkafka: KafkaSettings = Field(default_factory=dict)
    """librdkafka properties passed through (SASL, SSL, fetch tuning); they win over
    thalweg's. A value whose key names a credential (`sasl.password`, `ssl.key.password`,
    `sasl.oauthbearer.client.secret`, ...) is a secret: write a reference
    (`${env:KAFKA_PASSWORD}`); it is never shown."""
    password: SecretRef | None = None
    """The SASL password (librdkafka's `sasl.password`, which it wins over), a secret:
    write a reference (`${env:KAFKA_PASSWORD}`); it is resolved only when a consumer is
    built."""
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    """Records per emitted batch at most."""
    max_batch_bytes: int = Field(default=DEFAULT_MAX_BATCH_BYTES, ge=1)
    """Bytes per emitted batch at most (adapts to the record size seen)."""
    metadata_prefix: str = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
    metadata_timeout: PositiveDuration = DEFAULT_METADATA_TIMEOUT
    """How long to wait for the brokers' metadata before failing (seconds or ISO 8601)."""
    max_records_per_s: Annotated[float, Field(gt=0), AfterValidator(_finite)] | None = None
    """A rate limit per partition, records per second; unset = none."""
    partition_check_interval: PositiveDuration | None = DEFAULT_PARTITION_CHECK_INTERVAL
    """How often a metadata request looks for partitions added while the flow runs;
    unset = no check."""
    fail_on_new_partitions: bool = False
    """Fail the flow when a partition appears, so a restart reads it."""
    isolation_level: IsolationLevel = "read_committed"
    """`read_committed` (records of aborted transactions skipped) or `read_uncommitted`."""
    prefetch_budget: Annotated[int, Field(ge=1)] | None = DEFAULT_PREFETCH_BUDGET
    """Bytes librdkafka may prefetch for all partitions of a process, shared out evenly;
    unset = 4 MiB per partition."""
    unreachable_timeout: PositiveDuration | None = DEFAULT_UNREACHABLE_TIMEOUT
    """In a bounded run, how long a partition may read nothing while the brokers are
    unreachable before the run fails; unset = wait indefinitely."""

    @property
    def add_config(self) -> dict[str, Any]:
        """:attr:`librdkafka` with its secrets and :attr:`password` resolved.

        Call it where a client is built, never to show.

        Raises:
            ConfigError: Naming a secret reference that does not resolve.
        """
        return resolved_settings(self.librdkafka, self.password)

    @property
    def partition_check_interval_s(self) -> float | None:
        """:attr:`partition_check_interval` in seconds (``None``: no check)."""
        interval = self.partition_check_interval
        return None if interval is None else interval.total_seconds()

    @property
    def unreachable_timeout_s(self) -> float | None:
        """:attr:`unreachable_timeout` in seconds (``None``: wait indefinitely)."""
        timeout = self.unreachable_timeout
        return None if timeout is None else timeout.total_seconds()

    def consumer_config(self, partitions: int = 1) -> dict[str, Any]:
        """The librdkafka consumer settings, secrets resolved: where the password is used.

        Args:
            partitions: How many partitions share :attr:`prefetch_budget` (the source's
                listing); each consumer's ``queued.max.messages.kbytes`` is their share
                unless :attr:`librdkafka` sets it. Each fetch of a partition is at most
                256 KiB as stored, and a fetch that found nothing waits at most 100 ms
                at the broker (``max.partition.fetch.bytes``, ``fetch.wait.max.ms``),
                unless :attr:`librdkafka` sets them.

        Raises:
            ConfigError: Naming a secret reference that does not resolve.
        """
        prefetch = partition_prefetch_kbytes(self.prefetch_budget, partitions)
        config = consumer_config(
            self.brokers,
            {
                ISOLATION_LEVEL: self.isolation_level,
                MAX_PARTITION_FETCH_BYTES: DEFAULT_MAX_PARTITION_FETCH_BYTES,
                FETCH_WAIT_MAX_MS: DEFAULT_FETCH_WAIT_MAX_MS,
                QUEUED_MAX_MESSAGES_KBYTES: prefetch,
                QUEUED_MIN_MESSAGES: partition_prefetch_records(
                    self.prefetch_budget, partitions, self.batch_size
                ),
            },
        )
        config.update(self.add_config)
        return config
