"""Private: one topic-partition of a ``KafkaSource``, read by its own consumer.

Only the partition does I/O on the records: it assigns its partition explicitly (no
consumer group), polls without blocking, backs off through ``next_awake`` (``_backoff``),
sorts what its client reports (``_partition_health``), keeps its position and pace in
``_progress``, and snapshots the position after the last record it emitted
(``_resume``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, cast

import pyarrow as pa
from bytewax.inputs import StatefulSourcePartition
from confluent_kafka import Consumer, KafkaError, TopicPartition
from typing_extensions import override

from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.observability.gate import observe_source_partition
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import admission
from thalweg_bytewax.runtime.parts import encode_part
from thalweg_bytewax.system.heap_trim import note_records_read

from ._config import QUEUED_MIN_MESSAGES, partition_prefetch_records
from ._gather import (
    Gathered,
    PolledPiece,
    gather_messages,
    gather_native,
    keep_gathering,
    take_batch,
)
from ._lazy_consumer import LazyConsumer
from ._metadata import SourceMetadata
from ._native import CONSUME_ENV, open_native, use_native
from ._partition_health import ClientHealth
from ._progress import ReadProgress
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
        self._columns = config.columns
        self._max_bytes = config.max_batch_bytes
        # Read, not yet emitted: small polls fill one batch (`_gather`).
        self._gathered: Gathered[PolledPiece] = Gathered()
        self.stats = KafkaSourceStats() if stats is None else stats
        """This partition's counters (shared with ``KafkaSource.stats``)."""
        self._health = ClientHealth(
            self._key, self.stats, None if config.tail else config.unreachable_timeout_s
        )
        consumer_settings = config.consumer_config(sharing_prefetch)
        if QUEUED_MIN_MESSAGES not in config.add_config:  # the budget bounds records too
            consumer_settings[QUEUED_MIN_MESSAGES] = partition_prefetch_records(
                config.prefetch_budget, sharing_prefetch, config.batch_size
            )
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
        epoch = None if resume is None else resume["leader_epoch"]
        try:
            if resume is not None:
                # With the leader epoch of the last emitted record, librdkafka validates
                # the position against the broker's log before fetching (KIP-320): a log
                # truncated or recreated under it fails instead of being read. It does
                # so only when it learns the leader after the assignment (measured:
                # assigning on a consumer that already holds the topic's metadata skips
                # the validation), so a resumed partition is assigned first of all.
                self._assign(topic, partition, resume["next_offset"], epoch)
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
                self._assign(topic, partition, start, epoch)
        except BaseException:
            self._consumer.close()
            self._close_native()
            raise
        self._watch = meta.acquire_watch(self._consumer)
        self._fail_on_new = config.fail_on_new_partitions
        self._tp = TopicPartition(topic, partition)
        self._progress = ReadProgress(
            self._key,
            self._flow,
            self.stats,
            self._health,
            start=start,
            end_offset=None if config.tail else high,
            leader_epoch=epoch,
            batch_size=config.batch_size,
            max_bytes=config.max_batch_bytes,
            rate=config.max_records_per_s,
        )
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

    def _assign(self, topic: str, partition: int, offset: int, leader_epoch: int | None) -> None:
        epoch = -1 if leader_epoch is None else leader_epoch  # -1: none known
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
        next_offset = self._progress.next_offset
        return obs.polled(out, next_offset=next_offset, degraded=self._health.degraded)

    def _poll(self) -> list[KeyedBatch]:
        progress = self._progress
        if progress.eof:
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
            progress.next_awake = wait
            return []
        if self._native is not None:
            return self._poll_native()
        health = self._health
        msgs = self._consumer.consume(progress.budget() - self._gathered.rows, timeout=0)
        if health.fatal is not None:
            health.raise_fatal(progress.next_offset)
        good = msgs
        transient = False
        if msgs and any(m.error() is not None for m in msgs):
            good = [m for m in msgs if m.error() is None]
            transient = health.message_errors(
                [e for m in msgs if (e := m.error()) is not None],
                progress.next_offset,
                progress.leader_epoch,
            )
        now = datetime.now(UTC)
        gather_messages(
            self._gathered, good, cluster=self._cluster, columns=self._columns, read_at=now
        )
        return self._emit_gathered(now, transient=transient, polled=len(good))

    def _poll_native(self) -> list[KeyedBatch]:
        native, health, progress = self._native, self._health, self._progress
        try:
            out = native.consume(
                progress.budget() - self._gathered.rows, self._max_bytes - self._gathered.bytes
            )
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
            health.raise_fatal(progress.next_offset)
        n, errors = out[0], out[-1]
        transient = bool(errors) and health.message_errors(
            [KafkaError(code, text) for code, text, _ in errors],
            progress.next_offset,
            progress.leader_epoch,
        )
        now = datetime.now(UTC)
        gather_native(self._gathered, out, read_at=now)
        return self._emit_gathered(now, transient=transient, polled=n)

    def _emit_gathered(self, now: datetime, *, transient: bool, polled: int) -> list[KeyedBatch]:
        """Emit the gathered records unless the next poll can still add to them (``_gather``)."""
        progress = self._progress
        got = bool(self._gathered)
        if not progress.pace(now, transient=transient, got=got, position=self._position):
            return []
        if keep_gathering(
            self._gathered,
            polled=polled,
            max_records=progress.budget(),
            max_bytes=self._max_bytes,
            high_watermark=self._cached_watermarks()[1],
            end_offset=progress.end_offset,
        ):
            return []
        batch, last, epoch = take_batch(
            self._gathered,
            native=self._native is not None,
            topic=self._topic,
            partition=self._partition,
            cluster=self._cluster,
            columns=self._columns,
            now=now,
        )
        return self._emitted(batch, last, epoch, now)

    def _emitted(
        self, batch: pa.RecordBatch, last_offset: int, leader_epoch: int | None, now: datetime
    ) -> list[KeyedBatch]:
        self._progress.emitted(batch, last_offset, leader_epoch, now)
        note_records_read(batch.get_total_buffer_size())  # librdkafka freed their buffers
        return [(self._key, batch)]

    def _position(self) -> int:
        if self._native is not None:
            pos = int(self._native.position(self._topic, self._partition))
            return pos if pos >= 0 else self._progress.next_offset
        pos = self._consumer.position([self._tp])[0].offset
        return pos if pos >= 0 else self._progress.next_offset

    @override
    def next_awake(self) -> datetime | None:
        return self._progress.next_awake

    @override
    def snapshot(self) -> KafkaPartitionState:
        progress = self._progress
        return make_state(
            progress.next_offset, progress.leader_epoch, self._cluster, self._topic_id
        )

    @override
    def close(self) -> None:
        if self._watch is not None:
            self._watch.release()
            self._watch = None
        self._consumer.close()
        self._close_native()
