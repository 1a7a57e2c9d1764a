"""Kafka input: topic-partitions as keyed RawBatches, with nothing lost.

``KafkaSource`` reads with librdkafka (confluent-kafka), assigns partitions explicitly
(no consumer group) and keeps each partition's position in Bytewax recovery state, so a
resumed flow continues exactly after the last record it emitted — or fails loudly when
that position no longer exists (see ``_resume``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar, Self

from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax.config import SecretRef
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part
from thalweg_bytewax.system.heap_trim import start_heap_trim
from thalweg_bytewax.system.huge_pages import limit_huge_pages

from .._construct import construct
from ._args import librdkafka_keyword
from ._config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_PARTITION_CHECK_INTERVAL,
    DEFAULT_PREFETCH_BUDGET,
    DEFAULT_UNREACHABLE_TIMEOUT,
    IsolationLevel,
    StartingOffset,
)
from ._metadata import SourceMetadata
from ._partition import _KafkaPartition
from ._resume import KafkaPartitionState, read_state
from ._source_keywords import source_config
from .config import DEFAULT_METADATA_TIMEOUT, KafkaSourceConfig
from .stats import KafkaSourceStats

__all__ = [
    "KafkaPartitionState",
    "KafkaSource",
    "KafkaSourceConfig",
    "KafkaSourceStats",
    "StartingOffset",
]


class KafkaSource(FixedPartitionedSource[KeyedBatch, KafkaPartitionState]):
    """Read Kafka topics as keyed RawBatches ``(partition key, pyarrow.RecordBatch)``.

    Topic-partitions are the unit of parallelism: each becomes one Bytewax partition,
    keyed ``"<topic>:<partition>"``, whose resume state is the next offset to read (with
    the leader epoch of the last record read, the cluster id and the topic id, see
    :class:`KafkaPartitionState`). A resume position the partition no longer has (past
    its end, before its start, truncated under it, on another cluster, in a topic
    deleted and recreated under the same name) fails loudly; a
    partition without state in a flow that resumed other partitions of its topic (one
    added while the flow was down) starts at its earliest offset, so nothing written to
    it is skipped.
    Every record keeps its full fidelity (null vs empty key and value, ordered headers
    with duplicates and nulls, timestamp and its type, leader epoch) in the columns of
    :attr:`MetadataColumns.raw_schema`. Exactly-once with an epoch-durable sink such as
    :class:`~thalweg_bytewax.connectors.parquet.ParquetSink`.

    Example::

        from bytewax.dataflow import Dataflow
        import bytewax.operators as op
        from thalweg_bytewax.connectors.kafka import KafkaSource
        from thalweg_bytewax.connectors.parquet import ParquetSink

        flow = Dataflow("raw_lane")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("lane", raw, ParquetSink("lake/raw"))

    Args:
        brokers: Bootstrap servers, as a list or a comma-separated string.
        topics: Topics to read (all their partitions).
        tail: Keep reading new records forever (``True``) or stop at the end offsets
            seen when each partition starts (``False``, for bounded runs).
        starting_offset: Where partitions start on a flow's first run: ``"earliest"``,
            ``"latest"``, an absolute offset or a timezone-aware ``datetime``.
        librdkafka: librdkafka settings passed through (SASL/SSL, fetch tuning); they
            override thalweg's defaults. A value whose key names a credential
            (``sasl.password``, ``ssl.key.password``, ...) is kept as a
            :class:`~thalweg_bytewax.config.SecretRef`: a ``${env:NAME}`` reference, or
            a value never shown.
        password: The SASL password (``sasl.password``): a string or a ``SecretRef``,
            resolved only when a consumer is built.
        add_config: The old name of ``librdkafka`` (deprecated).
        batch_size: Most records per emitted batch.
        max_batch_bytes: Byte budget per emitted batch (adapts to the record size seen).
        metadata_prefix: Prefix of the metadata columns.
        metadata_timeout: How long to wait for the brokers before failing.
        max_records_per_s: Optional rate limit per partition (e.g. to protect a slow
            downstream or to replay history gently); unlimited by default.
        partition_check_interval: How often a background metadata request looks for
            partitions added to the topics while the flow runs (Bytewax cannot add
            them live: each is logged once and counted); ``None`` turns the check off.
        fail_on_new_partitions: Fail the flow when such a partition appears, so that an
            orchestrator restarts it and the restarted flow reads the partition from
            its earliest offset.
        isolation_level: ``"read_committed"`` (librdkafka's default: records of
            aborted transactions are skipped, counted in ``offsets_skipped``, and
            reading waits at an open transaction) or ``"read_uncommitted"`` (every
            record as written). An ``isolation.level`` in ``add_config`` wins.
        prefetch_budget: Bytes of records librdkafka may prefetch for all the source's
            partitions in a process, shared out evenly: each partition's
            ``queued.max.messages.kbytes`` is its share of the listed partitions,
            between 256 KiB and 4 MiB (256 MiB: up to 64 partitions keep 4 MiB, 256
            get 1 MiB), and its ``queued.min.messages`` 1,000 records. A partition
            gathers its polls into batches of ``batch_size`` while its log holds more,
            so its queue need not hold a batch (a queued small record costs librdkafka
            ~470 bytes, a gathered one ~150). ``None`` gives every partition 4 MiB;
            either setting in ``librdkafka`` wins.
        unreachable_timeout: In a bounded run (``tail=False``), how long a partition
            short of its end offset may read nothing while the client reports the
            brokers unreachable before the run fails with a ``SourceError`` naming the
            partition and offset (default 60 s; librdkafka alone retries forever, so the
            run would never end). ``None`` waits for the brokers indefinitely. A tailing
            source always waits (its health turns ``degraded``).

    The source's counters are :attr:`stats` (per partition key) and
    :meth:`total_stats`; partitions added while the flow runs are
    :attr:`new_partitions`.

    Raises:
        ConfigError: On an invalid argument.
    """

    needs_raw_lane: ClassVar[bool] = True
    """The broker forgets what it served: a second sink needs a raw lane (the gate)."""

    def __init__(
        self,
        brokers: Sequence[str] | str,
        topics: Sequence[str] | str,
        *,
        tail: bool = True,
        starting_offset: StartingOffset = "earliest",
        librdkafka: Mapping[str, Any] | None = None,
        password: str | SecretRef | None = None,
        add_config: Mapping[str, Any] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        metadata_prefix: str = DEFAULT_PREFIX,
        metadata_timeout: timedelta = DEFAULT_METADATA_TIMEOUT,
        max_records_per_s: float | None = None,
        partition_check_interval: timedelta | None = DEFAULT_PARTITION_CHECK_INTERVAL,
        fail_on_new_partitions: bool = False,
        isolation_level: IsolationLevel = "read_committed",
        prefetch_budget: int | None = DEFAULT_PREFETCH_BUDGET,
        unreachable_timeout: timedelta | None = DEFAULT_UNREACHABLE_TIMEOUT,
    ) -> None:
        librdkafka = librdkafka_keyword(librdkafka, add_config)
        # Validated once; no I/O here (partitions are built in build_part).
        config = source_config(
            brokers,
            topics,
            tail=tail,
            starting_offset=starting_offset,
            librdkafka=librdkafka,
            password=password,
            batch_size=batch_size,
            max_batch_bytes=max_batch_bytes,
            metadata_prefix=metadata_prefix,
            metadata_timeout=metadata_timeout,
            max_records_per_s=max_records_per_s,
            partition_check_interval=partition_check_interval,
            fail_on_new_partitions=fail_on_new_partitions,
            isolation_level=isolation_level,
            prefetch_budget=prefetch_budget,
            unreachable_timeout=unreachable_timeout,
        )
        self._start(config)

    @classmethod
    def from_config(cls, config: KafkaSourceConfig) -> Self:
        """The source a :class:`KafkaSourceConfig` describes (a pipeline's ``[source]``).

        Raises:
            ConfigError: When ``config`` is not a ``KafkaSourceConfig``.
        """
        return construct(cls, cls._start, KafkaSourceConfig.checked(config))

    def _start(self, config: KafkaSourceConfig) -> None:
        self._config = config
        self._meta = SourceMetadata(self._config)
        # The topics of which this process built a partition from resume state (the
        # flow resumed them).
        self._resumed_topics: set[str] = set()
        self._stats: dict[str, KafkaSourceStats] = {}

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(t, p) for t, p in self._meta.list_partitions()])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: KafkaPartitionState | int | None
    ) -> _KafkaPartition:
        """Build the partition ``for_part``, resuming from ``resume_state`` if any.

        A partition without resume state starts at ``starting_offset`` on the flow's
        first run. When this process already resumed another partition of the same
        topic, the flow has run before and this partition was not listed then: it was
        added to the topic since, so it starts at its earliest offset and nothing
        written to it before this start is skipped. Bytewax builds every partition
        that has resume state before those that have none on each worker, which makes
        the rule hold on a single worker and for partitions of one worker; see
        docs/guarantees.md for the multi-worker case. Resume state of earlier versions
        (the next offset alone, an ``int``) is accepted.

        Raises:
            ConfigError: When ``for_part`` is not a partition of ``topics``, or the
                resume state has neither shape.
            SourceError: When the resume position no longer exists in the partition.
        """
        crossings.note_readers([for_part])
        limit_huge_pages()
        start_heap_trim()
        cfg = self._config
        topic, partition = decode_part(for_part)
        if topic not in cfg.topics:
            msg = (
                f"kafka source `{step_id}`: partition `{for_part}` expected a topic of "
                f"{cfg.topics}; got topic `{topic}`; keep `{topic}` in `topics` or start "
                f"the flow with a fresh recovery directory"
            )
            raise ConfigError(msg)
        resume = None if resume_state is None else read_state(for_part, resume_state)
        if resume is not None:
            self._resumed_topics.add(topic)
        appeared = (
            resume is None and topic in self._resumed_topics and cfg.starting_offset != "earliest"
        )
        # A rebuilt partition keeps counting where it stopped: the counters only grow.
        stats = self._stats.get(for_part) or KafkaSourceStats()
        part = _KafkaPartition(
            cfg,
            self._meta,
            topic,
            partition,
            resume=resume,
            appeared=appeared,
            stats=stats,
            step_id=step_id,
            sharing_prefetch=sum(map(len, self._meta.listed.values())),
        )
        self._stats[for_part] = stats
        return part

    @property
    def config(self) -> KafkaSourceConfig:
        """The source's settings, as one frozen model (secrets shown as references)."""
        return self._config

    @property
    def prefetch_budget(self) -> int | None:
        """Bytes of records librdkafka may prefetch for this source's partitions in a process."""
        return self._config.prefetch_budget

    @property
    def stats(self) -> dict[str, KafkaSourceStats]:
        """The counters of every partition built in this process, by partition key.

        Live objects: they keep counting while the partitions run.
        """
        return dict(self._stats)

    def total_stats(self) -> KafkaSourceStats:
        """The counters of this process's partitions added up (a snapshot)."""
        return KafkaSourceStats.sum(self._stats.values())

    @property
    def new_partitions(self) -> dict[str, tuple[int, ...]]:
        """Partitions per topic added while the flow runs, not read until a restart."""
        watch = self._meta.watch
        return dict(watch.unread) if watch is not None else {}
