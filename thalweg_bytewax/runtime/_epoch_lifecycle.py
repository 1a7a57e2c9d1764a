"""How Bytewax drives an epoch sink partition: stage per batch, commit per epoch, fail closed.

``write_batch`` stages, ``snapshot`` makes the epoch durable (the sink's
``commit_epoch``) and then advances and records the coverage, ``close`` frees the
sink's clients and never publishes. After a failed write or commit the sink's
``abort`` runs and the partition refuses to write or snapshot again. Private to
:mod:`thalweg_bytewax.runtime.epoch_sink` (whose module docstring has the protocol),
whose :class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition` builds on
:class:`EpochLifecycle`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
from bytewax.outputs import StatefulSinkPartition
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage._replay_check import Ledger
from thalweg_bytewax.coverage.recording import CoverageRecorder
from thalweg_bytewax.errors import SinkTerminalError, ThalwegError
from thalweg_bytewax.runtime.sink_locators import UNLOCATED

if TYPE_CHECKING:
    from thalweg_bytewax.observability.hooks import SinkObserver
    from thalweg_bytewax.runtime.sink_stats import EpochSinkStats

__all__ = ["EpochLifecycle", "EpochSinkState"]

logger = logging.getLogger("thalweg_bytewax.runtime.epoch_sink")

EpochSinkState = dict[str, int]
"""Per source partition key, the next offset after the last committed row."""


class _Partition(Protocol):
    """What the lifecycle reads of the partition it drives."""

    component: str
    shard: int

    @property
    def stats(self) -> EpochSinkStats: ...

    _failed: bool
    _unlocated_pending: bool
    _ledgers: dict[str, Ledger]
    _recorder: CoverageRecorder | None
    _obs: SinkObserver | None

    def commit_epoch(self) -> None: ...

    def abort(self) -> None: ...

    def release(self) -> None: ...

    def _write(self, values: list[pa.RecordBatch]) -> None: ...

    def _refuse_if_failed(self, what: str) -> None: ...

    def _fail(self) -> None: ...


class EpochLifecycle(StatefulSinkPartition[pa.RecordBatch, EpochSinkState]):
    """The Bytewax-facing calls of an epoch sink partition and its failed flag."""

    _failed: bool

    @property
    def failed(self) -> bool:
        """Whether a write or commit failed; the partition then never publishes again."""
        return self._failed

    @override
    def write_batch(self: _Partition, values: list[pa.RecordBatch]) -> None:
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
    def snapshot(self: _Partition) -> EpochSinkState:
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
    def close(self: _Partition) -> None:
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

    def _refuse_if_failed(self: _Partition, what: str) -> None:
        if self._failed:
            msg = (
                f"{self.component}: shard {self.shard} cannot {what} after a failed write "
                f"or commit; expected a fresh partition, got the failed one (restart the "
                f"flow: the failed epoch replays from the source)"
            )
            raise SinkTerminalError(msg)

    def _fail(self: _Partition) -> None:
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
