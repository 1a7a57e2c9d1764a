"""The epoch-sink protocol: stage during the epoch, durable at ``snapshot()``, replays absorbed.

Every table and lane sink partition here is an :class:`EpochSinkPartition`, a Bytewax
``StatefulSinkPartition`` of keyed Arrow batches that carry their locator columns
(``<prefix>source_topic``, ``source_partition``, ``source_offset``). The base owns the
protocol; a sink implements a few hooks:

- ``open_partition(key, topic, partition)`` — once per source partition, on its first
  rows: what the target already holds, as an :class:`~thalweg_bytewax.coverage.OffsetCoverage`.
- ``stage(key, rows)`` — pipelined, no durable wait: produce asynchronously, append to
  a hidden staging file, buffer rows. Nothing staged is visible to readers.
- ``commit_epoch()`` — the one durable wait of the epoch (flush, fsync + atomic rename,
  ``COMMIT``). When it returns, everything staged since the last commit is durable.
- ``abort()`` — after a failed write or commit: drop what is staged (optional).
- ``release()`` — free clients and threads at ``close()``; never publishes (optional).
- ``held_record_ids(key, first, last)`` — the (offset, record id) pairs the target holds
  in a range, where the sink can read them back (optional).
- ``replaced_by_key(key, rows)`` — for a target that replaces rows by key (upserts):
  whether it holds a later row of each row's key (optional).

A sink whose ``open_partition`` finds its target lost what its coverage claims (a table
dropped or emptied by a user) refills it or refuses: it calls
:meth:`EpochSinkPartition.target_lost` so the coverage store forgets those partitions,
and reads :meth:`EpochSinkPartition.resumed_offset` to know whether the source will
replay them.

The base, in order, for each batch: refuses rows without a locator; refuses rows whose
source partition routes to another shard of the sink (one owner per source partition:
coverage is per (sink, topic, partition), so two shards writing one partition would
skip each other's rows on a replay); refuses negative offsets and rows that go back in
offset order within a run (skipping by range is exact only for one ordered stream), and,
after a resume, rows below the resumed offsets that the target does not hold (the
source never replays below them: a step upstream held such rows across epochs), and
names with a warning the replayed rows above them that the target does not hold;
skips rows whose offsets are covered, checking the first skipped rows of each partition
by record id against the target; stamps ``<prefix>emit_ts``; stages the rest. Every
group of a batch is checked before any is staged. What a commit records as covered
(:meth:`EpochSinkPartition.pending_coverage`) is each staged group's span and each
input span accounted for whole, never the hole between two groups: the rows of such a
hole may have reached another shard and been refused there, so a sink names what it
writes (a file, a lineage range) within one pending span.

**Rows without a locator** (a stock Bytewax source, window results): a partition built
with ``locators="absent"`` takes batches that carry none of the locator columns (and
refuses those that carry any). Such a batch is stamped and staged whole under the key
:data:`UNLOCATED`, with no ownership, order, offset or coverage checks, and committed
with the same epoch durability. Nothing can tell a replay from new rows, so the
guarantee is the sink's write mode's (:func:`unlocated_guarantee`): at-least-once for
appends (a crash after the target's commit and before the recovery snapshot writes the
epoch's rows again), effectively-once for upserts by key (the replay overwrites the
same keys).

**Where durability lives (the two tensions).** Bytewax's connector guide asks a
``StatefulSinkPartition`` to be durable before ``write_batch`` returns. That allows one
in-flight batch per sink (the per-batch ``flush()`` of Bytewax's own Kafka sink; the
reference's ADR-0060 records a ~20,000x loss from it). This base makes the epoch the
burst instead: durable in ``snapshot()``. That is sound on Bytewax 0.21.1 for
``FixedPartitionedSink`` partitions, because ``src/outputs.rs`` calls ``snapshot()`` at
every epoch close for each partition written in that epoch and only then hands the
state to the recovery store, so the source position stored for an epoch never leads
what the sink made durable. It does not hold for ``DynamicSink`` partitions: they are
never snapshotted, so such a partition must be durable before each ``write_batch``
returns. ``close()`` runs only on a clean finish, never on an abort, so it cannot be the
only flush; this base never publishes there (on a clean finish Bytewax snapshots the
last epoch first). After a failed write or commit the failed flag is set, the sink's
``abort()`` runs, and the partition refuses to write or snapshot again: rows of a
failed epoch are never published, and they replay from the source on resume.

The state a partition snapshots is, per source partition key (``"orders:3"``), the next
offset after the last committed row. On resume everything below it counts as covered,
together with what ``open_partition`` reports, so a crash between a sink's commit and
the recovery store's commit is absorbed: the replayed rows are skipped, not written
twice. Kill-and-resume tests (``tests/runtime/test_epoch_sink.py``, ``tests/sinks/``)
SIGKILL a flow at the fault points ``epoch_sink.mid_write`` (rows of the epoch staged),
``epoch_sink.before_commit`` and ``epoch_sink.after_commit``.

**Coverage store.** After :meth:`EpochSinkPartition.record_coverage_to`, each snapshot
merges what the epoch committed (and, once per source partition and run, what
``open_partition`` reported) into a :mod:`~thalweg_bytewax.coverage.store`, after
``commit_epoch()`` returns and before the state goes back to Bytewax: the store may lag,
never lead (:mod:`thalweg_bytewax.coverage.recording`). A batch that carries an
input span (:mod:`thalweg_bytewax.coverage.input_span`) covers that whole span, so offsets
rejected upstream are not gaps.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from bytewax.outputs import StatefulSinkPartition
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage._replay_check import Ledger, ReplayCheck
from thalweg_bytewax.coverage.input_span import input_span, without_input_span
from thalweg_bytewax.coverage.recording import CoverageRecorder
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, ThalwegError
from thalweg_bytewax.lanes.dlq import DLQ_REASON, DLQ_RULES, DLQ_STEP_ID
from thalweg_bytewax.observability.gate import observe_sink_partition
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.runtime import admission, crossings
from thalweg_bytewax.runtime._epoch_intake import EpochIntake
from thalweg_bytewax.runtime.sink_locators import (
    UNLOCATED,
    LocatorMode,
    check_locator_mode,
    unlocated_guarantee,
)

if TYPE_CHECKING:
    from thalweg_bytewax.observability.hooks import SinkObserver

__all__ = [
    "UNLOCATED",
    "EpochSinkPartition",
    "EpochSinkState",
    "EpochSinkStats",
    "buffered_size",
    "LocatorMode",
    "check_locator_mode",
    "unlocated_guarantee",
]

logger = logging.getLogger(__name__)

EpochSinkState = dict[str, int]
"""Per source partition key, the next offset after the last committed row."""


class EpochSinkStats:
    """Plain counters of one sink partition, exported by the observability layer.

    Attributes:
        rows_written: Rows staged for writing (published at their epoch's commit).
        rows_skipped_replay: Replayed rows skipped because the target already holds them.
        epochs_committed: Epochs whose commit returned.
    """

    __slots__ = ("epochs_committed", "rows_skipped_replay", "rows_written")

    def __init__(self) -> None:
        self.rows_written = 0
        self.rows_skipped_replay = 0
        self.epochs_committed = 0


class EpochSinkPartition(EpochIntake, StatefulSinkPartition[pa.RecordBatch, EpochSinkState], ABC):
    """Base of every epoch-durable sink partition: stage per batch, commit per epoch.

    Source partitions are the unit of ownership: each is written by the one shard its
    key routes to. Exactly-once where the sink's commit is atomic and ``open_partition``
    reports what the target holds; replays are skipped. See the module docstring for the
    protocol and why durability lives in ``snapshot()``.

    Args:
        component: The sink's name in messages, e.g. ``"parquet sink"``.
        columns: The metadata column names (locator, record id, emit time).
        resume_state: The state Bytewax resumed this partition with, or None.
        shard: This partition's index among the sink's partitions.
        shards: How many partitions the sink lists (keys route by :meth:`owner_of`).
        stats: The counters to update (a sink may pass a subclass with more).
        locators: ``"required"`` (exactly once by source offsets) or ``"absent"``
            (rows without a locator, staged under :data:`UNLOCATED`; see the module
            docstring for the guarantee).
    """

    replay_remedy: ClassVar[str] = "point the sink at a new target"
    """The end of the message when a replay does not match what the target holds."""
    merge_remedy: ClassVar[str] = "give each its own target (e.g. `dlq/decode`, `dlq/contract`)"
    """The end of the message when rows of a source partition go back in offset order."""
    readiness_critical: ClassVar[bool] = False
    """Whether a failure of this sink drops the process's readiness (the raw lane's does)."""
    target_replaces_rows: bool = False
    """Whether the target replaces rows by key (upserts): it may no longer hold an offset
    it committed, so a covered row it does not hold is no evidence of a held-back row."""
    unlocated_remedy: ClassVar[str] = (
        "keep the locator with metadata='locator' or 'all', or number rows from another "
        "source with `twg.to_batches(..., locator='counter')`"
    )
    """The end of the message when a batch has no locator columns."""

    def __init__(
        self,
        *,
        component: str,
        columns: MetadataColumns,
        resume_state: EpochSinkState | None,
        shard: int,
        shards: int,
        stats: EpochSinkStats | None = None,
        locators: LocatorMode = "required",
    ) -> None:
        self.component = component
        self.locators: LocatorMode = check_locator_mode(component, locators)
        self.columns = columns
        self.shard = shard
        self.shards = shards
        self.stats = stats if stats is not None else EpochSinkStats()
        self._resume = dict(resume_state or {})
        self._ledgers: dict[str, Ledger] = {}
        self._failed = False
        self._unlocated_pending = False  # rows without a locator staged since the commit
        self._recorder: CoverageRecorder | None = None
        self._lost_keys: set[str] = set()  # source partitions whose target was found emptied
        # Counters, commit durations and health when observability is on (else None),
        # registered by `observe_as` once the output step's id is known.
        self._obs: SinkObserver | None = None
        self._observed_as: str | None = None
        self._replay = ReplayCheck(self)
        self._acknowledge_as: tuple[str, str] | None = None  # (flow, sink step id)

    def acknowledge_as(self, step_id: str) -> None:
        """Acknowledge each source partition's rows as they are staged, as sink ``step_id``.

        The acknowledgements release the sources' admission budget
        (:mod:`thalweg_bytewax.runtime.admission`): a source partition of this process
        waits while more than its budget is emitted and not yet staged by every sink
        that acknowledges it. Dead-letter batches are not acknowledged (a DLQ sink sees
        a partition's rejects only, and would hold it back).
        """
        flow = admission.flow_of(step_id)
        self._acknowledge_as = (flow, step_id)
        admission.ledger().expect_acknowledgements(flow)

    def observe_as(self, step_id: str) -> None:
        """Export this partition's counters, commit durations and health under ``step_id``.

        ``step_id`` is the id Bytewax gives the output step (``flow.step``), so two sinks
        of one class are two series. :meth:`ShardedEpochSink.build_part
        <thalweg_bytewax.runtime.sharded_sink.ShardedEpochSink.build_part>` calls it; a
        second call with another id is refused (a partition has one step), the same id
        is a no-op. Nothing is registered while observability is off.

        Raises:
            ConfigError: When the partition is already observed under another step id.
        """
        if self._observed_as is not None:
            if self._observed_as == step_id:
                return
            msg = (
                f"{self.component}: partition #{self.shard} is observed as step "
                f"`{self._observed_as}`; got a second step id `{step_id}`; build one "
                "partition per output step"
            )
            raise ConfigError(msg)
        self._observed_as = step_id
        self._obs = observe_sink_partition(
            step_id,
            f"{step_id} ({self.component}) #{self.shard}",
            self.stats,
            lambda: {key: ledger.next_offset for key, ledger in self._ledgers.items()},
            critical=self.readiness_critical,
        )

    # -- hooks -----------------------------------------------------------------------

    @abstractmethod
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        """Prepare to write a source partition and say which of its offsets are held.

        Called once per source partition, on its first rows of this run. The coverage
        may lag what the target holds (a replay is then written again, or skipped by
        record id), never lead it.
        """

    @abstractmethod
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        """Stage rows of one source partition, in offset order; no durable wait here."""

    @abstractmethod
    def commit_epoch(self) -> None:
        """Make everything staged since the last commit durable and visible, or raise."""

    def abort(self) -> None:  # noqa: B027 - optional hook, nothing to drop by default
        """Drop what is staged after a failed write or commit (never publish it)."""

    def release(self) -> None:  # noqa: B027 - optional hook, nothing to free by default
        """Free clients, files and threads at ``close()``; never publish anything."""

    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        """The ``(offset, record id)`` columns the target holds in ``[first, last]``.

        Columns are named as in :attr:`columns`. None when the sink cannot read them
        back (then replays are skipped by offset alone).
        """
        return None

    def replaced_by_key(self, key: str, rows: pa.RecordBatch) -> np.ndarray | None:
        """Per row of ``rows``, whether the target holds a later row of the row's key.

        Only asked of a target that replaces rows by key (:attr:`target_replaces_rows`),
        for replayed rows of source partition ``key`` it does not hold at their offsets.
        An ``int8`` array: ``1`` where the target's row of that key comes from a later
        offset of this source partition (the row was replaced: a replay), ``0`` where it
        holds no row of that key or one from an earlier offset (it never got the row),
        ``-1`` where that row comes from another source (nothing orders the two). None
        when the sink cannot look keys up (then such rows are skipped with a warning).
        """
        return None

    def describe_target(self, key: str) -> str:
        """How messages name the target of a source partition, e.g. ``lane `a/t/0```."""
        return f"the target of `{key}`"

    # -- the protocol ----------------------------------------------------------------

    def record_coverage_to(self, store: CoverageStore | str, sink_id: str) -> None:
        """Record every committed epoch's coverage into ``store`` under ``sink_id``.

        Call before the first write (sinks do it in ``build_part`` when given a
        ``coverage_store=``).

        Args:
            store: A coverage store, a path (SQLite) or a ``postgresql://`` URL.
            sink_id: The sink's id in the store (its step id, unless configured).
        """
        self._recorder = CoverageRecorder(store, sink_id, self.component)
        if self._lost_keys:
            self._recorder.forget(sorted(self._lost_keys))

    def target_lost(self, keys: list[str]) -> None:
        """Say the target no longer holds what it covered of source partitions ``keys``.

        A sink calls it when its start check finds the target emptied or dropped and it
        drops the stale coverage it kept there: the coverage store's rows of ``keys``
        are deleted before anything is recorded again (the store never leads).
        """
        self._lost_keys.update(keys)
        if self._recorder is not None:
            self._recorder.forget(list(keys))

    def resumed_offset(self, key: str) -> int | None:
        """The next offset of ``key`` in the state Bytewax resumed this partition with.

        The source resumes at or past it, so offsets below it are never replayed; None
        when the partition resumed without state for ``key``.
        """
        return self._resume.get(key)

    @property
    def coverage_recorder(self) -> CoverageRecorder | None:
        """The recorder into the coverage store, or None when the sink records none."""
        return self._recorder

    @property
    def failed(self) -> bool:
        """Whether a write or commit failed; the partition then never publishes again."""
        return self._failed

    def pending_coverage(self, key: str) -> OffsetCoverage | None:
        """The offsets of ``key`` staged since the last commit, else None.

        What the next commit records as covered: each staged group's span and each
        input span accounted for whole, merged where adjacent, never the holes between
        them. ``stage()`` names what it writes within one of these spans: rows of a hole
        may have reached another shard and been refused there, and a file or table
        lineage named across it would claim them.
        """
        ledger = self._ledgers.get(key)
        return ledger.pending if ledger is not None else None

    def in_one_pending_span(self, key: str, first: int, last: int) -> bool:
        """Whether ``first..last`` lies inside one span of ``key``'s pending coverage.

        A sink names a file or a range only across such offsets; where this is False,
        it starts a new file (``stage()`` of the lane sinks).
        """
        pending = self.pending_coverage(key)
        return pending is not None and not pending.uncovered(first, last)

    def pending_pieces(
        self, key: str, rows: pa.RecordBatch
    ) -> list[tuple[int, int, pa.RecordBatch]]:
        """``rows`` cut at the holes of ``key``'s pending coverage: ``(first, last, rows)``.

        One piece unless the batch straddles offsets the commit will not claim (rows a
        replay skipped because the target holds them elsewhere): a file named for one
        piece never spans them.
        """
        offsets = rows.column(self.columns.source_offset)
        bounds = pc.min_max(offsets)
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        pending = self.pending_coverage(key)
        if pending is None or not pending.uncovered(first, last):
            return [(first, last, rows)]
        pieces = []
        for a, b in pending.spans:
            lo, hi = max(a, first), min(b, last)
            if lo > hi:
                continue
            part = rows.filter(pc.and_(pc.greater_equal(offsets, lo), pc.less_equal(offsets, hi)))
            if part.num_rows:
                got = pc.min_max(part.column(self.columns.source_offset))
                pieces.append((got["min"].as_py(), got["max"].as_py(), part))
        return pieces

    def coverage(self, key: str) -> OffsetCoverage | None:
        """The committed coverage of a source partition this run has met, else None."""
        ledger = self._ledgers.get(key)
        return ledger.coverage if ledger is not None else None

    @override
    def write_batch(self, values: list[pa.RecordBatch]) -> None:
        self._refuse_if_failed("write")
        obs = self._obs
        if obs is not None:
            values = obs.writing(values)
        try:
            self._write(values)
        except BaseException as exc:
            self._fail()
            if obs is not None:
                obs.failed(exc)
            raise

    @override
    def snapshot(self) -> EpochSinkState:
        self._refuse_if_failed("commit an epoch")
        _faults.checkpoint("epoch_sink.before_commit")
        started = time.perf_counter()
        try:
            self.commit_epoch()
        except BaseException as exc:
            self._fail()
            if self._obs is not None:
                self._obs.failed(exc)
            raise
        if self._obs is not None:
            self._obs.committed(time.perf_counter() - started)
        _faults.checkpoint("epoch_sink.after_commit")
        self._unlocated_pending = False
        recorder = self._recorder
        for key, ledger in self._ledgers.items():
            pending = ledger.pending
            if pending is not None and pending.last is not None:
                ledger.coverage = ledger.coverage.union(pending)
                ledger.next_offset = max(ledger.next_offset, pending.last + 1)
                ledger.pending = None
                if recorder is not None:
                    recorder.add(key, pending)
        if recorder is not None:
            recorder.flush()  # after the durable commit, before the state: lags, never leads
        self.stats.epochs_committed += 1
        return {key: ledger.next_offset for key, ledger in self._ledgers.items()}

    @override
    def close(self) -> None:
        # Bytewax also calls close() while unwinding from an error; publishing then
        # could make rows of a failed epoch visible, and raising would hide the error:
        # an exception in a destructor during the unwind aborts the process, so the
        # error that failed the run would never be printed. close() never raises.
        try:
            staged = [k for k, ledger in self._ledgers.items() if ledger.pending is not None]
            if self._unlocated_pending:
                staged.append(UNLOCATED)
            if staged and not self._failed:
                logger.warning(
                    "%s: shard %s closed with rows of %s source partitions staged after "
                    "the last snapshot; they are not published and replay on resume",
                    self.component,
                    self.shard,
                    len(staged),
                )
        finally:
            try:
                self.release()
            except Exception as exc:  # noqa: BLE001 - logged: nothing published depends on it
                # Only thalweg's own messages are secret-free; a client's text may not be.
                reason = str(exc) if isinstance(exc, ThalwegError) else type(exc).__name__
                logger.error(  # noqa: TRY400 - the reason is the message; no traceback
                    "%s: shard %s could not release its files or clients at close: %s; "
                    "nothing unpublished is lost (it replays on resume)",
                    self.component,
                    self.shard,
                    reason,
                )

    def _refuse_if_failed(self, what: str) -> None:
        if self._failed:
            msg = (
                f"{self.component}: shard {self.shard} cannot {what} after a failed write "
                f"or commit; expected a fresh partition, got the failed one (restart the "
                f"flow: the failed epoch replays from the source)"
            )
            raise SinkTerminalError(msg)

    def _fail(self) -> None:
        if self._failed:
            return
        self._failed = True
        try:
            self.abort()
        except Exception:  # the original error is the one to raise
            logger.warning(
                "%s: shard %s could not drop its staged rows after a failure; they are "
                "never published and are removed on resume",
                self.component,
                self.shard,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )

    def _write(self, values: list[pa.RecordBatch]) -> None:
        now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
        for given in values:
            if given.num_rows == 0:
                continue
            if self.locators == "absent":
                self._write_unlocated(without_input_span(given), now_us)
                continue
            span = input_span(given)
            batch = without_input_span(given)
            ack = self._acknowledge_as if not _is_dead_letter(batch) else None
            for key, topic, partition, group, group_first, group_last in self._split(batch):
                first, last = group_first, group_last
                crossings.arrived(key, group.num_rows)
                ledger = self._ledger(key, topic, partition)
                # Order first, coverage second: a row that goes back within a run may
                # fall inside a span this run committed, and skipping it as a replay
                # would lose it silently.
                self._check_order(ledger, key, first, last)
                covered = None  # the coverage mask of the rows, where already computed
                if ledger.replay_end is not None:
                    if first < ledger.replay_end:
                        covered = self._replay.check(ledger, key, group)
                    else:
                        ledger.replay_end = ledger.held = None  # past the replay: done
                if span is not None and span[0] == key:
                    # The whole input batch is accounted for: rows here, the rest
                    # rejected upstream. Committed with this epoch, never before.
                    ledger.pending = _widen(
                        ledger.pending, [(min(first, span[1]), max(last, span[2]))]
                    )
                rows = self._uncovered(ledger, key, group, first, last, covered)
                if rows.num_rows == 0:
                    if ack is not None:
                        admission.ledger().acknowledged(ack[0], key, ack[1], last)
                    continue
                staged = [(first, last)]
                if rows is not group:
                    # Only what is not covered yet: never named for rows the target
                    # already holds elsewhere.
                    bounds = pc.min_max(rows.column(self.columns.source_offset))
                    first, last = bounds["min"].as_py(), bounds["max"].as_py()
                    staged = ledger.coverage.uncovered(first, last) or [(first, last)]
                # The group's span, not a span from the last commit's rows: a hole
                # between two groups (rows refused by another shard) is not claimed.
                ledger.pending = _widen(ledger.pending, staged)
                self.stats.rows_written += rows.num_rows
                self.stage(key, _stamp(rows, self.columns.emit_ts, now_us))
                _faults.checkpoint("epoch_sink.mid_write")  # staged, the epoch still open
                if ack is not None:
                    admission.ledger().acknowledged(ack[0], key, ack[1], last)

    def _write_unlocated(self, batch: pa.RecordBatch, now_us: int) -> None:
        """Stage a batch without a locator whole: nothing to own, order or skip."""
        cols = self.columns
        present = [
            n
            for n in (cols.source_topic, cols.source_partition, cols.source_offset)
            if n in batch.schema.names
        ]
        if present:
            msg = (
                f"{self.component}: with locators='absent' batches carry no locator; got "
                f"column `{present[0]}`; pass locators='required' to write them exactly "
                f"once, or drop the locator columns upstream"
            )
            raise ConfigError(msg)
        self.stats.rows_written += batch.num_rows
        self._unlocated_pending = True
        self.stage(UNLOCATED, _stamp(batch, cols.emit_ts, now_us))

    def _ledger(self, key: str, topic: str, partition: int) -> Ledger:
        ledger = self._ledgers.get(key)
        if ledger is not None:
            return ledger
        coverage = self.open_partition(key, topic, partition)
        if self._recorder is not None:
            self._recorder.add(key, coverage)  # what the target holds: recorded at the next commit
        resumed = self._resume.get(key)
        held_first, held_last = coverage.first, coverage.last
        if resumed is not None and resumed > 0:
            coverage = coverage.add(0, resumed - 1)
        last = coverage.last
        next_offset = max(resumed or 0, last + 1 if last is not None else 0)
        replay_end = None
        if resumed:
            replay_end = max(resumed, held_last + 1 if held_last is not None else 0)
        ledger = Ledger(coverage, next_offset, resumed if resumed else None, replay_end, held_first)
        self._ledgers[key] = ledger
        if coverage:
            logger.info(
                "%s: `%s` resumes with offsets up to %s committed",
                self.component,
                key,
                next_offset - 1,
            )
        return ledger


def _widen(pending: OffsetCoverage | None, spans: list[tuple[int, int]]) -> OffsetCoverage:
    """The pending offsets with ``spans`` added (merged where adjacent)."""
    added = OffsetCoverage(spans)
    return added if pending is None else pending.union(added)


_EMIT_TS: Final = pa.timestamp("us", tz="UTC")


def _stamp(batch: pa.RecordBatch, name: str, now_us: int) -> pa.RecordBatch:
    """Set ``name`` to the write time on every row (``_twg_emit_ts``)."""
    values = np.full(batch.num_rows, now_us, dtype=np.int64)
    stamp = pa.Array.from_buffers(_EMIT_TS, batch.num_rows, [None, pa.py_buffer(values)])
    idx = batch.schema.get_field_index(name)
    if idx >= 0:
        return batch.set_column(idx, batch.schema.field(idx), stamp)
    return batch.append_column(pa.field(name, _EMIT_TS), stamp)


def buffered_size(batch: pa.RecordBatch) -> int:
    """The bytes ``batch`` holds: its slice's, or its whole buffers' where Arrow cannot tell.

    pyarrow 22 and earlier cannot measure the byte range of a sliced ``string_view`` column
    (``ArrowTypeError``); its buffers' total size then stands in (an overcount, never 0).
    """
    try:
        return int(batch.nbytes)
    except pa.ArrowTypeError:
        return int(batch.get_total_buffer_size())


def _is_dead_letter(batch: pa.RecordBatch) -> bool:
    names = set(batch.schema.names)
    return DLQ_REASON in names and DLQ_RULES in names and DLQ_STEP_ID in names
