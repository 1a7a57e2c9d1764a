"""Private: one topic-partition of a ``KafkaSource``, read by its own consumer.

Only the partition does I/O on the records: it assigns its partition explicitly (no
consumer group), polls without blocking, backs off through ``next_awake`` (``_backoff``),
sorts what its client reports (``_partition_health``), and snapshots the position after
the last record it emitted (``_resume``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pyarrow as pa
from bytewax.inputs import StatefulSourcePartition
from confluent_kafka import Consumer, KafkaError, TopicPartition
from typing_extensions import override

from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.observability.gate import observe_source_partition
from thalweg_bytewax.records.kafka_batches import raw_batch_from_messages, raw_batch_from_native
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import admission
from thalweg_bytewax.runtime.parts import encode_part

from ._backoff import ERROR_BACKOFF, IDLE_BACKOFF, Backoff
from ._lazy_consumer import LazyConsumer
from ._metadata import SourceMetadata
from ._native import CONSUME_ENV, open_native, use_native
from ._partition_health import ClientHealth
from ._resume import KafkaPartitionState, check_resume, make_state
from ._start_offset import initial_offset
from .config import KafkaSourceConfig as SourceConfig
from .stats import KafkaSourceStats

logger = logging.getLogger(__name__)


class _KafkaPartition(StatefulSourcePartition[KeyedBatch, KafkaPartitionState]):
    def __init__(
        self,
        config: SourceConfig,
        meta: SourceMetadata,
        topic: str,
        partition: int,
        *,
        resume: KafkaPartitionState | None,
        appeared: bool = False,
        stats: KafkaSourceStats | None = None,
        step_id: str = "kafka_source",
        sharing_prefetch: int = 1,
    ) -> None:
        self._key = encode_part(topic, partition)
        self._flow = admission.flow_of(step_id)
        self._tail = config.tail
        self._columns = config.columns
        self._batch_size = config.batch_size
        self._rate = config.max_records_per_s
        self._max_bytes = config.max_batch_bytes
        self._avg_record_bytes = 0.0
        self.stats = KafkaSourceStats() if stats is None else stats
        """This partition's counters (shared with ``KafkaSource.stats``)."""
        self._health = ClientHealth(
            self._key, self.stats, None if config.tail else config.unreachable_timeout_s
        )
        consumer_settings = config.consumer_config(sharing_prefetch)
        # The data plane: the native batch consume into Arrow buffers when it is built
        # (a librdkafka handle shared with the worker's other partitions of this source,
        # see `open_native`), else confluent-kafka's messages.
        # The confluent-kafka consumer serves metadata, watermarks and offset lookups;
        # with the native consume it is opened only when one of those is not already
        # answered by the listing, so listed partitions open no handle of their own.
        native = use_native(consumer_settings)
        resumes_epoch = resume is not None and resume["leader_epoch"] is not None
        self._native: Any = (
            open_native(consumer_settings, resumes_epoch=resumes_epoch) if native else None
        )
        # Client-level errors (brokers down, authentication) are not returned by
        # consume(); librdkafka reports them here, served from within consume().
        consumer_settings["error_cb"] = self._health.on_client_error
        try:
            self._consumer: Consumer = (
                cast("Consumer", LazyConsumer(consumer_settings))
                if native
                else Consumer(consumer_settings)
            )
        except BaseException:
            self._close_native()
            raise
        self._topic, self._partition = topic, partition
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
            self._cluster, partitions = meta.topic_metadata(topic, self._consumer)
            # Stored with each snapshot: a topic recreated under the same name has another.
            self._topic_id = meta.topic_id(topic, self._consumer)
            if partition not in partitions:
                msg = f"kafka source: partition `{self._key}` does not exist"
                raise SourceError(msg)
            tp = TopicPartition(topic, partition)
            low, high = meta.watermarks(tp, self._consumer)
            if resume is not None:
                check_resume(self._key, resume, low, high, self._cluster, self._topic_id)
                start = resume["next_offset"]
            else:
                # A partition that appeared after the flow's first run starts at its
                # earliest offset (KafkaSource.build_part): nothing written to it is skipped.
                start = low if appeared else initial_offset(self._consumer, config, tp, low, high)
                self._assign(topic, partition, start)
            self._next_offset = start
            self._end_offset = None if self._tail else high
            self._eof = self._end_offset is not None and start >= self._end_offset
        except BaseException:
            self._consumer.close()
            self._close_native()
            raise
        self._watch = meta.acquire_watch(self._consumer)
        self._fail_on_new = config.fail_on_new_partitions
        self._tp = TopicPartition(topic, partition)
        self._idle = Backoff(IDLE_BACKOFF)
        self._errors = Backoff(ERROR_BACKOFF)
        self._next_awake: datetime | None = None
        # Metrics, health and batch spans when observability is on (else None).
        self._obs = observe_source_partition(
            step_id,
            topic,
            partition,
            self.stats,
            headers_column=self._columns.source_headers,
            watermarks=self._cached_watermarks,
        )
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

    def _cached_watermarks(self) -> tuple[int, int]:
        if self._native is not None:
            low, high = self._native.watermarks(self._topic, self._partition)
            return int(low), int(high)
        return self._consumer.get_watermark_offsets(self._tp, cached=True)

    def _close_native(self) -> None:
        if self._native is not None:
            self._native.close()

    def _assign(self, topic: str, partition: int, offset: int) -> None:
        epoch = -1 if self._leader_epoch is None else self._leader_epoch  # -1: none known
        if self._native is not None:
            try:
                self._native.assign(topic, partition, offset, epoch)
            except RuntimeError as exc:
                doing = "assigning it"
                raise self._native_failure(doing, exc) from exc
            return
        self._consumer.assign([TopicPartition(topic, partition, offset, leader_epoch=epoch)])

    def _native_failure(self, doing: str, exc: RuntimeError) -> SourceError:
        """The native consume's internal failure as a ``SourceError`` naming the partition."""
        msg = (
            f"kafka source: partition {self._key}: the native consume failed {doing} "
            f"({exc}); restart the flow to resume from the last snapshot, and if it "
            f"happens again read through confluent-kafka with {CONSUME_ENV}=pure"
        )
        return SourceError(msg)

    def _budget(self) -> int:
        if self._avg_record_bytes <= 0:
            return self._batch_size
        return max(1, min(self._batch_size, int(self._max_bytes / self._avg_record_bytes)))

    @override
    def next_batch(self) -> list[KeyedBatch]:
        obs = self._obs
        if obs is None:
            return self._poll()
        try:
            out = self._poll()
        except StopIteration:
            obs.finished()
            raise
        except Exception as exc:
            obs.failed(exc)
            raise
        return obs.polled(out, next_offset=self._next_offset, degraded=self._health.degraded)

    def _poll(self) -> list[KeyedBatch]:
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
        wait = admission.ledger().admit(self._flow, self._key)
        if wait is not None:  # a sink of this process is behind: read nothing yet
            self._next_awake = wait
            return []
        if self._native is not None:
            return self._poll_native()
        health = self._health
        msgs = self._consumer.consume(self._budget(), timeout=0)
        if health.fatal is not None:
            health.raise_fatal(self._next_offset)
        good = msgs
        transient = False
        if msgs and any(m.error() is not None for m in msgs):
            good = [m for m in msgs if m.error() is None]
            transient = health.message_errors(
                [e for m in msgs if (e := m.error()) is not None],
                self._next_offset,
                self._leader_epoch,
            )
        now = datetime.now(UTC)
        if not self._pace(now, transient=transient, got=bool(good)):
            return []
        batch = raw_batch_from_messages(
            good, cluster=self._cluster, columns=self._columns, ingest_ts=now
        )
        last = good[-1]
        return self._emitted(batch, int(last.offset() or 0), last.leader_epoch(), now)

    def _poll_native(self) -> list[KeyedBatch]:
        native, health = self._native, self._health
        try:
            out = native.consume(self._budget(), self._max_bytes)
        except RuntimeError as exc:  # librdkafka refused the assignment or the queue
            doing = "reading it"
            raise self._native_failure(doing, exc) from exc
        client = native.take_client_error()
        if client is not None:
            code, fatal, text, count = client
            if fatal:
                health.fatal = health.fatal or KafkaError(code, text, fatal=True)
            else:
                for _ in range(count - 1):  # the callback kept the last of `count` errors
                    self.stats.transient_errors += 1
                health.on_client_error(KafkaError(code, text))
        if health.fatal is not None:
            health.raise_fatal(self._next_offset)
        n, errors = out[0], out[-1]
        transient = bool(errors) and health.message_errors(
            [KafkaError(code, text) for code, text, _ in errors],
            self._next_offset,
            self._leader_epoch,
        )
        now = datetime.now(UTC)
        if not self._pace(now, transient=transient, got=n > 0):
            return []
        batch = raw_batch_from_native(
            out,
            topic=self._topic,
            partition=self._partition,
            cluster=self._cluster,
            columns=self._columns,
            ingest_ts=now,
        )
        epoch = batch.column(self._columns.source_leader_epoch)[n - 1].as_py()
        last = batch.column(self._columns.source_offset)[n - 1].as_py()
        return self._emitted(batch, last, epoch, now)

    def _pace(self, now: datetime, *, transient: bool, got: bool) -> bool:
        """Set the next wake-up; whether there are records (else StopIteration at the end)."""
        if got:
            self._health.received()
        if transient:
            self._next_awake = now + self._errors.next()
        elif not got:
            self._next_awake = now + self._idle.next()
        else:
            self._errors.reset()
            self._idle.reset()
            self._next_awake = None
            self._health.recovered()
        if not got:
            if self._end_offset is not None and self._position() >= self._end_offset:
                self._eof = True
                raise StopIteration
            self._health.raise_if_unreachable_too_long(self._next_offset, self._end_offset)
            return False
        return True

    def _emitted(
        self, batch: pa.RecordBatch, last_offset: int, leader_epoch: int | None, now: datetime
    ) -> list[KeyedBatch]:
        # Offsets without a record: aborted transactions, markers, compacted records.
        self.stats.offsets_skipped += last_offset + 1 - self._next_offset - batch.num_rows
        self._next_offset = last_offset + 1
        self._leader_epoch = leader_epoch
        size = batch.nbytes
        self._avg_record_bytes = size / batch.num_rows
        self.stats.records += batch.num_rows
        self.stats.bytes += size
        self.stats.batches += 1
        if self._end_offset is not None and self._next_offset >= self._end_offset:
            self._eof = True
        if self._rate is not None:
            self._next_awake = now + timedelta(seconds=batch.num_rows / self._rate)
        admission.ledger().emitted(self._flow, self._key, last_offset, size)
        return [(self._key, batch)]

    def _position(self) -> int:
        if self._native is not None:
            pos = int(self._native.position(self._topic, self._partition))
            return pos if pos >= 0 else self._next_offset
        pos = self._consumer.position([self._tp])[0].offset
        return pos if pos >= 0 else self._next_offset

    @override
    def next_awake(self) -> datetime | None:
        return self._next_awake

    @override
    def snapshot(self) -> KafkaPartitionState:
        return make_state(self._next_offset, self._leader_epoch, self._cluster, self._topic_id)

    @override
    def close(self) -> None:
        if self._watch is not None:
            self._watch.release()
            self._watch = None
        self._consumer.close()
        self._close_native()
