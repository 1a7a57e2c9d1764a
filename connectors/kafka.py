"""Kafka input: topic-partitions as keyed RawBatches, with nothing lost.

``KafkaSource`` reads with librdkafka (confluent-kafka), assigns partitions explicitly
(no consumer group) and keeps each partition's position in Bytewax recovery state, so a
resumed flow continues exactly after the last record it emitted — or fails loudly when
that position no longer exists (see ``_kafka_resume``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pyarrow as pa
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from typing_extensions import override

from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.record import raw_batch_from_messages
from thalweg_bytewax.runtime.parts import decode_part, encode_part

from ._kafka_args import (
    check_bool,
    check_config,
    check_interval,
    check_names,
    check_optional_interval,
    check_positive_int,
    check_rate,
    check_starting_offset,
)
from ._kafka_common import consumer_config, fetch_metadata, is_fatal
from ._kafka_resume import (
    KafkaPartitionState,
    check_resume,
    is_truncation,
    make_state,
    read_state,
    truncation_message,
)
from ._kafka_watch import PartitionWatch

__all__ = ["KafkaPartitionState", "KafkaSource", "KafkaSourceStats", "StartingOffset"]

logger = logging.getLogger(__name__)

StartingOffset = Literal["earliest", "latest"] | int | datetime
"""Where a partition without resume state starts: the beginning, the end, an absolute
offset, or the first record at or after a timestamp."""

KeyedBatch = tuple[str, pa.RecordBatch]
"""One source partition's batch, keyed by its partition key (``"orders:3"``)."""

# 10k records per poll amortises the per-batch cost (Arrow assembly, Bytewax step
# overhead) while one poll of small records stays a few MiB; see docs/benchmarks.md.
DEFAULT_BATCH_SIZE = 10_000
# Byte budget per emitted batch; keeps a batch of large records far below Arrow's 2 GiB
# binary-array limit and bounds the memory of one item in flight.
DEFAULT_MAX_BATCH_BYTES = 32 * 1024 * 1024
_WATERMARK_MAX_AGE_S = 30.0
# Bytewax lists the partitions on every worker; the workers of a process share the
# source, so entries this young are not asked for again.
_WATERMARK_SHARED_S = 1.0
# A metadata request every 30 s per source and process costs the brokers nothing
# (librdkafka refreshes its own metadata every 5 min by default) and notices a new
# partition well before anyone would.
DEFAULT_PARTITION_CHECK_INTERVAL = timedelta(seconds=30)
_IDLE_BACKOFF = (timedelta(milliseconds=1), timedelta(milliseconds=50))
_ERROR_BACKOFF = (timedelta(milliseconds=50), timedelta(seconds=5))


class KafkaSourceStats:
    """Plain counters of one partition, exported by the observability layer."""

    __slots__ = ("batches", "bytes", "records", "transient_errors")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.batches = 0
        self.transient_errors = 0


class _Backoff:
    def __init__(self, bounds: tuple[timedelta, timedelta]) -> None:
        self._first, self._cap = bounds
        self._current = self._first

    def next(self) -> timedelta:
        delay = self._current
        self._current = min(self._current * 2, self._cap)
        return delay

    def reset(self) -> None:
        self._current = self._first


class _KafkaPartition(StatefulSourcePartition[KeyedBatch, KafkaPartitionState]):
    def __init__(
        self,
        source: KafkaSource,
        topic: str,
        partition: int,
        *,
        resume: KafkaPartitionState | None,
        appeared: bool = False,
    ) -> None:
        self._key = encode_part(topic, partition)
        self._tail = source.tail
        self._columns = source.columns
        self._batch_size = source.batch_size
        self._rate = source.max_records_per_s
        self._max_bytes = source.max_batch_bytes
        self._avg_record_bytes = 0.0
        self.stats = KafkaSourceStats()
        self._fatal: KafkaError | None = None
        self._degraded = False
        config = consumer_config(source.brokers, source.add_config)
        # Client-level errors (brokers down, authentication) are not returned by
        # consume(); librdkafka reports them here, served from within consume().
        config["error_cb"] = self._on_client_error
        self._consumer = Consumer(config)
        self._leader_epoch: int | None = None
        try:
            if resume is not None:
                # With the leader epoch of the last emitted record, librdkafka validates
                # the position against the broker's log before fetching (KIP-320): a log
                # truncated or recreated under it fails instead of being read. It does
                # so only when it learns the leader after the assignment (measured:
                # assigning on a consumer that already holds the topic's metadata skips
                # the validation), so a resumed partition is assigned first of all.
                self._leader_epoch = resume["leader_epoch"]
                self._assign(topic, partition, resume["next_offset"])
            self._cluster, partitions = source.topic_metadata(topic, self._consumer)
            if partition not in partitions:
                msg = f"kafka source: partition `{self._key}` does not exist"
                raise SourceError(msg)
            tp = TopicPartition(topic, partition)
            low, high = source.watermarks(tp, self._consumer)
            if resume is not None:
                check_resume(self._key, resume, low, high, self._cluster)
                start = resume["next_offset"]
            else:
                # A partition that appeared after the flow's first run starts at its
                # earliest offset (KafkaSource.build_part): nothing written to it is skipped.
                start = low if appeared else _initial_offset(self._consumer, source, tp, low, high)
                self._assign(topic, partition, start)
            self._next_offset = start
            self._end_offset = None if self._tail else high
            self._eof = self._end_offset is not None and start >= self._end_offset
        except BaseException:
            self._consumer.close()
            raise
        self._watch = source.partition_watch(self._consumer)
        self._fail_on_new = source.fail_on_new_partitions
        self._tp = TopicPartition(topic, partition)
        self._idle = _Backoff(_IDLE_BACKOFF)
        self._errors = _Backoff(_ERROR_BACKOFF)
        self._next_awake: datetime | None = None
        logger.info(
            "kafka partition %s %s at offset %s (watermarks %s..%s)",
            self._key,
            "resumed"
            if resume is not None
            else "appeared after the flow's first run; starts at its earliest"
            if appeared
            else "starts",
            start,
            low,
            high,
        )

    def _assign(self, topic: str, partition: int, offset: int) -> None:
        epoch = -1 if self._leader_epoch is None else self._leader_epoch  # -1: none known
        self._consumer.assign([TopicPartition(topic, partition, offset, leader_epoch=epoch)])

    def _budget(self) -> int:
        if self._avg_record_bytes <= 0:
            return self._batch_size
        return max(1, min(self._batch_size, int(self._max_bytes / self._avg_record_bytes)))

    def _on_client_error(self, err: KafkaError) -> None:
        if is_fatal(err):
            self._fatal = self._fatal or err
            return
        self.stats.transient_errors += 1
        if not self._degraded:  # log once per state change, not per error
            self._degraded = True
            logger.warning("kafka partition %s: client error %s, retrying", self._key, err.name())

    @override
    def next_batch(self) -> list[KeyedBatch]:
        if self._eof:
            raise StopIteration
        if self._fail_on_new and self._watch is not None and self._watch.unread:
            unread = ", ".join(
                f"`{t}`: {','.join(map(str, ps))}" for t, ps in sorted(self._watch.unread.items())
            )
            msg = (
                f"kafka source: partitions were added while the flow runs ({unread}); "
                f"expected the partitions listed at start; restart the flow to read them "
                f"from their earliest offset (`fail_on_new_partitions=True`)"
            )
            raise SourceError(msg)
        msgs = self._consumer.consume(self._budget(), timeout=0)
        if self._fatal is not None:
            msg = (
                f"kafka source: partition `{self._key}` failed at offset {self._next_offset}: "
                f"{self._fatal.str()} ({self._fatal.name()}); check the brokers and the "
                f"security settings in `add_config`"
            )
            raise SourceError(msg)
        good = msgs
        transient = False
        if msgs and any(m.error() is not None for m in msgs):
            good = []
            for m in msgs:
                err = m.error()
                if err is None:
                    good.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                    continue
                elif is_truncation(err):
                    msg = truncation_message(
                        self._key, self._next_offset, self._leader_epoch, err
                    )
                    raise SourceError(msg)
                elif is_fatal(err):
                    msg = (
                        f"kafka source: partition `{self._key}` failed at offset "
                        f"{self._next_offset}: {err.str()} ({err.name()})"
                    )
                    raise SourceError(msg)
                else:
                    # Counted and backed off; the good records of this poll are still
                    # emitted, since librdkafka's fetch position has moved past them.
                    transient = True
                    self.stats.transient_errors += 1
                    logger.warning("kafka partition %s: transient error %s", self._key, err.name())
        now = datetime.now(UTC)
        if transient:
            self._next_awake = now + self._errors.next()
        elif not good:
            self._next_awake = now + self._idle.next()
        else:
            self._errors.reset()
            self._idle.reset()
            self._next_awake = None
            if self._degraded:
                self._degraded = False
                logger.info("kafka partition %s: receiving again", self._key)
        if not good:
            if self._end_offset is not None and self._position() >= self._end_offset:
                self._eof = True
                raise StopIteration
            return []
        batch = raw_batch_from_messages(
            good, cluster=self._cluster, columns=self._columns, ingest_ts=now
        )
        last = good[-1]
        self._next_offset = int(last.offset() or 0) + 1
        self._leader_epoch = last.leader_epoch()
        size = batch.nbytes
        self._avg_record_bytes = size / batch.num_rows
        self.stats.records += batch.num_rows
        self.stats.bytes += size
        self.stats.batches += 1
        if self._end_offset is not None and self._next_offset >= self._end_offset:
            self._eof = True
        if self._rate is not None:
            self._next_awake = now + timedelta(seconds=batch.num_rows / self._rate)
        return [(self._key, batch)]

    def _position(self) -> int:
        pos = self._consumer.position([self._tp])[0].offset
        return pos if pos >= 0 else self._next_offset

    @override
    def next_awake(self) -> datetime | None:
        return self._next_awake

    @override
    def snapshot(self) -> KafkaPartitionState:
        return make_state(self._next_offset, self._leader_epoch, self._cluster)

    @override
    def close(self) -> None:
        if self._watch is not None:
            self._watch.release()
            self._watch = None
        self._consumer.close()


def _initial_offset(
    consumer: Consumer, source: KafkaSource, tp: TopicPartition, low: int, high: int
) -> int:
    start = source.starting_offset
    if start == "earliest":
        return low
    if start == "latest":
        return high
    if isinstance(start, datetime):
        ms = int(start.timestamp() * 1000)
        found = consumer.offsets_for_times(
            [TopicPartition(tp.topic, tp.partition, ms)], timeout=source.metadata_timeout_s
        )[0]
        return high if found.offset in (OFFSET_END, -1) else found.offset
    if start < low:
        msg = (
            f"kafka source: starting offset {start} of `{tp.topic}:{tp.partition}` was "
            f"already deleted (earliest available is {low}); choose an offset >= {low}"
        )
        raise SourceError(msg)
    return int(start)


class KafkaSource(FixedPartitionedSource[KeyedBatch, KafkaPartitionState]):
    """Read Kafka topics as keyed RawBatches ``(partition key, pyarrow.RecordBatch)``.

    Topic-partitions are the unit of parallelism: each becomes one Bytewax partition,
    keyed ``"<topic>:<partition>"``, whose resume state is the next offset to read (with
    the leader epoch of the last record read and the cluster id, see
    :class:`KafkaPartitionState`). A resume position the partition no longer has (past
    its end, before its start, truncated under it, on another cluster) fails loudly; a
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
        add_config: librdkafka settings passed through as-is (SASL/SSL, fetch tuning);
            they override thalweg's defaults.
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

    Raises:
        ConfigError: On an invalid argument.
    """

    def __init__(
        self,
        brokers: Sequence[str] | str,
        topics: Sequence[str] | str,
        *,
        tail: bool = True,
        starting_offset: StartingOffset = "earliest",
        add_config: Mapping[str, Any] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        metadata_prefix: str = DEFAULT_PREFIX,
        metadata_timeout: timedelta = timedelta(seconds=10),
        max_records_per_s: float | None = None,
        partition_check_interval: timedelta | None = DEFAULT_PARTITION_CHECK_INTERVAL,
        fail_on_new_partitions: bool = False,
    ) -> None:
        # Every argument is checked, by name: a wrong type must not surface as a raw
        # TypeError later, nor be read as another value (True as offset 1).
        self.brokers = check_names(brokers, "brokers")
        # ":" separates topic and partition in partition keys; Kafka refuses it anyway.
        self.topics = check_names(topics, "topics", forbid=":")
        self.tail = check_bool(tail, "tail")
        start = check_starting_offset(starting_offset, "starting_offset")
        self.starting_offset: StartingOffset = start  # type: ignore[assignment]
        self.add_config = check_config(add_config, "add_config")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.max_batch_bytes = check_positive_int(max_batch_bytes, "max_batch_bytes")
        try:
            self.columns = MetadataColumns(metadata_prefix)
        except (ConfigError, TypeError) as exc:
            msg = (
                f"kafka source: `metadata_prefix` expected letters, digits and underscores "
                f"starting with a letter or underscore; got {metadata_prefix!r}"
            )
            raise ConfigError(msg) from exc
        self.metadata_timeout_s = check_interval(metadata_timeout, "metadata_timeout")
        self.max_records_per_s = check_rate(max_records_per_s, "max_records_per_s")
        self.partition_check_interval_s = check_optional_interval(
            partition_check_interval, "partition_check_interval"
        )
        self.fail_on_new_partitions = check_bool(fail_on_new_partitions, "fail_on_new_partitions")
        self._metadata: dict[str, tuple[str | None, frozenset[int]]] = {}
        # Partitions of each topic as listed at start, and the topics of which this
        # process built a partition from resume state (the flow resumed them).
        self._listed: dict[str, frozenset[int]] = {}
        self._resumed_topics: set[str] = set()
        self._watch: PartitionWatch | None = None
        # (topic, partition) -> (low, high, when fetched): filled by list_parts, each
        # entry used once by the partition built right after.
        self._watermarks: dict[tuple[str, int], tuple[int, int, float]] = {}

    def watermarks(self, tp: TopicPartition, consumer: Consumer) -> tuple[int, int]:
        """Low and high watermark of ``tp``: prefetched by ``list_parts`` or asked now.

        An entry is used once and only within seconds of its fetch.
        """
        cached = self._watermarks.pop((tp.topic, tp.partition), None)
        if cached is not None and time.monotonic() - cached[2] < _WATERMARK_MAX_AGE_S:
            return cached[0], cached[1]
        low, high = consumer.get_watermark_offsets(
            tp, timeout=self.metadata_timeout_s, cached=False
        )
        return int(low), int(high)

    def _prefetch_watermarks(self, consumer: Consumer, parts: list[tuple[str, int]]) -> None:
        # Asked on the listing consumer, which is connected and knows every leader:
        # ~0.5 ms a partition instead of a fresh consumer's ~3.6 ms. An optimisation
        # only: a failure leaves the per-partition query, which reports it by name.
        for topic, partition in parts:
            cached = self._watermarks.get((topic, partition))
            if cached is not None and time.monotonic() - cached[2] < _WATERMARK_SHARED_S:
                continue  # another worker of this process just asked
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.metadata_timeout_s, cached=False
                )
            except KafkaException as exc:
                logger.debug(
                    "kafka source: watermark prefetch stopped at %s:%s (%s)", topic, partition, exc
                )
                return
            self._watermarks[(topic, partition)] = (int(low), int(high), time.monotonic())

    def topic_metadata(self, topic: str, consumer: Consumer) -> tuple[str | None, frozenset[int]]:
        """Cluster id and partition numbers of ``topic``, fetched once per process.

        ``list_parts`` fills the cache, so building each partition costs no extra
        metadata round trip (measured: ~17 ms each against a local broker).
        """
        cached = self._metadata.get(topic)
        if cached is None:
            md = fetch_metadata(consumer, self.brokers, topic, self.metadata_timeout_s)
            cached = (md.cluster_id, frozenset(md.topics[topic].partitions))
            self._metadata[topic] = cached
        return cached

    @override
    def list_parts(self) -> list[str]:
        consumer = Consumer(consumer_config(self.brokers, self.add_config))
        try:
            for topic in self.topics:
                self._metadata.pop(topic, None)  # always fresh when listing
            if len(self.topics) > 1:
                # One metadata request for every topic; a topic missing from it is asked
                # for alone below, which names it in the error.
                md = fetch_metadata(consumer, self.brokers, None, self.metadata_timeout_s)
                for topic in self.topics:
                    tmd = md.topics.get(topic)
                    if tmd is not None and tmd.error is None:
                        self._metadata[topic] = (md.cluster_id, frozenset(tmd.partitions))
            pairs: list[tuple[str, int]] = []
            for topic in self.topics:
                _, partitions = self.topic_metadata(topic, consumer)
                self._listed[topic] = partitions
                pairs.extend((topic, p) for p in sorted(partitions))
            self._prefetch_watermarks(consumer, pairs)
        finally:
            consumer.close()
        return [encode_part(t, p) for t, p in pairs]

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
        topic, partition = decode_part(for_part)
        if topic not in self.topics:
            msg = (
                f"kafka source `{step_id}`: partition `{for_part}` expected a topic of "
                f"{self.topics}; got topic `{topic}`; keep `{topic}` in `topics` or start "
                f"the flow with a fresh recovery directory"
            )
            raise ConfigError(msg)
        resume = None if resume_state is None else read_state(for_part, resume_state)
        if resume is not None:
            self._resumed_topics.add(topic)
        appeared = (
            resume is None and topic in self._resumed_topics and self.starting_offset != "earliest"
        )
        return _KafkaPartition(self, topic, partition, resume=resume, appeared=appeared)

    @property
    def new_partitions(self) -> dict[str, tuple[int, ...]]:
        """Partitions per topic added while the flow runs, not read until a restart."""
        return dict(self._watch.unread) if self._watch is not None else {}

    def partition_watch(self, consumer: Consumer) -> PartitionWatch | None:
        """The process's watch for partitions added while the flow runs, held once.

        Started by the first partition built (``None`` when the check is off); each
        partition releases it on close.
        """
        if self.partition_check_interval_s is None:
            return None
        if self._watch is None:
            listed = {
                topic: self._listed.get(topic) or self.topic_metadata(topic, consumer)[1]
                for topic in self.topics
            }
            self._watch = PartitionWatch(
                self.brokers,
                self.add_config,
                listed,
                interval_s=self.partition_check_interval_s,
                timeout_s=self.metadata_timeout_s,
            )
        self._watch.acquire()
        return self._watch
