"""Private: the sink partition behind ``KafkaSink`` — produce, flush per epoch, reconcile.

The epoch protocol (failed flag, ownership, ordering, replay skipping and record-id
checks, never publishing in ``close()``) is :class:`~thalweg_bytewax.runtime.epoch_sink.
EpochSinkPartition`'s. Here ``stage`` produces asynchronously into a bounded local queue,
``commit_epoch`` flushes (or commits the epoch's transaction) and checks every delivery
report, and ``open_partition`` reads back what earlier attempts wrote (``_sink_reconcile``).
See :mod:`thalweg_bytewax.connectors.kafka.sink` for the guarantee.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState
from thalweg_bytewax.runtime.parts import stable_route

from .._epoch_partition import ConfiguredSinkPartition
from ._retry import retried
from ._sink_clients import close_clients, take_marks
from ._sink_delivery import DeliveryReports
from ._sink_offsets import end_offsets
from ._sink_produce import produce_all
from ._sink_reconcile import Stable, Written, read_written
from ._sink_records import prepare, trace_headers
from .stats import KafkaSinkStats

if TYPE_CHECKING:
    from thalweg_bytewax.codecs.base import Encoder

    from .config import KafkaSinkConfig

__all__ = ["out_state_key"]

logger = logging.getLogger(__name__)

# How long one wait for room in a full local queue blocks before checking the deadline.
_QUEUE_POLL_S = 0.05
# librdkafka scans for timed-out records about once a second.
_FLUSH_GRACE_S = 2.0


def out_state_key(topic: str, partition: int) -> str:
    """The state key of an output partition's reconcile position.

    Starts with NUL, which no source partition key (a topic or a path) contains, so
    these entries never meet the source keys of the epoch-sink state.
    """
    return f"\x00out:{topic}:{partition}"


class _KafkaSinkPartition(ConfiguredSinkPartition["KafkaSinkConfig"]):
    replay_remedy: ClassVar[str] = "write to a new topic or start with a fresh recovery directory"
    merge_remedy: ClassVar[str] = "give each its own sink step (e.g. one per DLQ reason)"

    def __init__(
        self,
        config: KafkaSinkConfig,
        encoder: Encoder | None,
        step_id: str,
        resume: EpochSinkState | None,
        shard: int,
    ) -> None:
        self.stats: KafkaSinkStats = KafkaSinkStats()
        super().__init__(f"kafka sink `{config.topic}`", config, resume, shard, stats=self.stats)
        self._encoder = encoder
        self._topic = config.topic
        settings = config.producer_config(step_id, shard)
        self._reports = DeliveryReports(
            self.component, self._topic, shard, settings.get("transactional.id")
        )
        settings["on_delivery"] = self._reports.on_delivery
        settings["error_cb"] = self._reports.on_client_error
        self._producer = Producer(settings)
        self._reader = Consumer(config.reader_config())
        self._clients_closed = False
        self._in_txn = False
        self._stable: Stable | None = None
        try:
            # A broker restarting (no node answers, or a node is gone from the metadata)
            # is waited for until `unreachable_timeout`.
            md = retried(
                lambda t: self._producer.list_topics(self._topic, timeout=t),
                wait_s=config.wait_s,
                request_s=config.metadata_timeout_s,
            )
            meta = md.topics.get(self._topic)
            if meta is None or meta.error is not None or not meta.partitions:
                msg = (
                    f"{self.component}: topic `{self._topic}` has no partitions "
                    f"({meta.error.name() if meta is not None and meta.error else 'not found'}); "
                    f"create the topic before the flow starts"
                )
                raise SinkTerminalError(msg)
            self._partitions = sorted(meta.partitions)
            if config.transactional:
                # Fences an earlier producer with this transactional.id and aborts its
                # open transaction, so its unflushed epoch never becomes visible.
                retried(
                    self._producer.init_transactions,
                    wait_s=config.wait_s,
                    request_s=config.metadata_timeout_s,
                )
                # After the fence, so that this shard's previous run wrote everything
                # below the marks; the read-back waits only behind those records, which
                # no transaction of this run precedes (no deadlock: see _sink_stable).
                self._stable = take_marks(
                    config.reader_config(),
                    self._topic,
                    self._partitions,
                    producer_settings=settings,
                    wait_s=config.wait_s,
                    component=self.component,
                )
        except KafkaException as exc:
            self._close_clients()
            msg = (
                f"{self.component}: could not reach the brokers within "
                f"{config.wait_s:g} s ({exc.args[0].name()}); check `brokers` and the "
                f"security settings in `librdkafka`, or raise `unreachable_timeout`"
            )
            raise SinkTransientError(msg) from exc
        except BaseException:
            self._close_clients()
            raise
        # Where reading back starts per output partition: the end offsets stored by the
        # last snapshot, or (no state) the earliest offset. Kept in every snapshot.
        resume = resume or {}
        self._starts: dict[int, int | None] = {
            p: resume.get(out_state_key(self._topic, p)) for p in self._partitions
        }
        self._written: dict[str, Written] = {}
        self._read: set[int] = set()

    # -- hooks of the epoch protocol -------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        if self._config.partitioner == "source":
            self._check_source_partition(key, partition)
            wanted = [partition]
        else:
            wanted = self._partitions
        todo = {p: self._starts[p] for p in wanted if p not in self._read}
        if todo:
            found, read = read_written(
                self._reader,
                self._topic,
                todo,
                mine=self._mine,
                timeout_s=self._config.wait_s,
                component=self.component,
                stable=self._stable,
            )
            self._read.update(todo)
            self.stats.records_read_back += read
            for k, w in found.items():
                have = self._written.get(k)
                if have is None:
                    self._written[k] = w
                else:
                    have.offsets.extend(w.offsets)
                    have.record_ids.extend(w.record_ids)
            if read:
                logger.info(
                    "%s: shard %s read back %s records of partitions %s to reconcile",
                    self.component,
                    self.shard,
                    read,
                    sorted(todo),
                )
        written = self._written.get(key)
        return written.coverage() if written is not None else OffsetCoverage()

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        written = self._written.get(key)
        if written is None:
            return None
        return written.held(first, last, self.columns.source_offset, self.columns.record_id)

    @override
    def describe_target(self, key: str) -> str:
        return f"topic `{self._topic}`"

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        self._reports.raise_errors()
        config = self._config
        prepared = prepare(
            rows,
            topic=self._topic,
            component=self.component,
            columns=self.columns,
            encoder=self._encoder,
            key=config.key,
            headers=config.headers,
            keep_source_headers=config.keep_source_headers,
            by_source_partition=config.partitioner == "source",
            trace=trace_headers(),
        )
        if config.transactional and not self._in_txn:
            self._reports.call("begin the epoch's transaction", self._producer.begin_transaction)
            self._in_txn = True
        try:
            produce_all(self._producer, self._topic, prepared, self._wait_for_room)
        except KafkaException as exc:
            # A producer that failed fatally (fenced by a newer run, say) refuses every
            # record with `_FATAL`; the cause reaches the error callback on a poll, or
            # the poll raises it.
            cause = exc
            try:
                self._producer.poll(0)
            except KafkaException as polled:
                cause = polled
            self._reports.raise_errors()
            what = "produce the epoch's records"
            raise self._reports.error_of(what, cause) from exc
        self.stats.records_produced += len(prepared.values)
        self.stats.bytes_produced += prepared.value_bytes

    @override
    def commit_epoch(self) -> None:
        config = self._config
        timeout = config.acknowledge_s
        if self._in_txn:
            # commit_transaction flushes first and fails if any delivery failed; one
            # that failed transiently (the coordinator restarting) is committed again.
            self._reports.call(
                "commit the epoch's transaction",
                lambda: retried(
                    self._producer.commit_transaction, wait_s=timeout, request_s=timeout
                ),
            )
            self._in_txn = False
            self.stats.transactions_committed += 1
        else:
            # Records time out at `message.timeout.ms` (the delivery timeout); the grace
            # lets their error reports, which name the partition, arrive before giving up.
            remaining = self._producer.flush(timeout + _FLUSH_GRACE_S)
            self._reports.raise_errors()
            if remaining:
                msg = (
                    f"{self.component}: {remaining} records were not delivered within "
                    f"{timeout:g} s (`delivery_timeout` + `unreachable_timeout`); expected "
                    f"every record of the epoch acknowledged; check the brokers: the epoch "
                    f"replays on resume"
                )
                raise SinkTransientError(msg)
        self._reports.raise_errors()
        ends = end_offsets(
            self._reader, self._topic, self._partitions, config.wait_s, self.component
        )
        self._starts.update(ends)

    @override
    def snapshot(self) -> EpochSinkState:
        state = super().snapshot()
        for p, start in self._starts.items():
            if start is not None:
                state[out_state_key(self._topic, p)] = start
        return state

    @override
    def abort(self) -> None:
        if self._in_txn:
            self._in_txn = False
            self.stats.transactions_aborted += 1
            if self._reports.fenced:
                # The newer producer's init_transactions aborted this transaction on
                # the broker; this one can no longer talk to the coordinator.
                return
            self._producer.abort_transaction(self._config.delivery_timeout_s)
        else:
            # Records still queued locally are dropped; those already sent may land
            # and are skipped by the reconciliation on resume.
            self._producer.purge(in_queue=True, in_flight=False)

    @override
    def release(self) -> None:
        self._close_clients()

    # -- helpers ---------------------------------------------------------------------

    @override
    def owner_of(self, key: str) -> int:
        # Hash routing, never the co-located one: reading back starts per output
        # partition where this shard's own last snapshot ended, so a source partition
        # must not move to another shard between runs (see KafkaSink.part_fn).
        return stable_route(key, self.shards)

    def _mine(self, key: str) -> bool:
        return self.owner_of(key) == self.shard

    def _close_clients(self) -> None:
        if self._clients_closed:  # a second close(), as every sink partition allows
            return
        self._clients_closed = True
        close_clients(
            self._reader,
            self._producer,
            fenced=self._reports.fenced,
            component=self.component,
            shard=self.shard,
        )

    def _check_source_partition(self, key: str, partition: int) -> None:
        if partition not in self._partitions:
            msg = (
                f'{self.component}: `partitioner="source"` writes `{key}` to partition '
                f"{partition}; expected one of the topic's {len(self._partitions)} "
                f"partitions; add partitions to `{self._topic}` or use "
                f'`partitioner="key"`'
            )
            raise SinkTerminalError(msg)

    def _wait_for_room(self, args: tuple[Any, ...]) -> None:
        """Poll until the full local queue takes the record, or fail after the timeout."""
        self.stats.queue_full_waits += 1
        wait_s = self._config.acknowledge_s
        deadline = time.monotonic() + wait_s
        while True:
            self._producer.poll(_QUEUE_POLL_S)
            self._reports.raise_errors()
            try:
                self._producer.produce(*args)
            except BufferError:
                if time.monotonic() > deadline:
                    msg = (
                        f"{self.component}: the local producer queue stayed full for "
                        f"{wait_s:g} s ({len(self._producer)} records waiting); expected "
                        f"the brokers to take records; check the brokers or raise "
                        f"`delivery_timeout`"
                    )
                    raise SinkTransientError(msg) from None
                continue
            return
