"""Recording a sink's committed coverage into a coverage store, after its durable commit.

:class:`CoverageRecorder` is what the epoch-sink base uses when a sink is given a
``coverage_store=``: the base hands it what the target already holds when a source
partition is first met this run (``open_partition``'s coverage) and the spans each
epoch commits, and calls :meth:`CoverageRecorder.flush` right after ``commit_epoch()``
returns and before the epoch's state goes back to Bytewax. So the store may lag the
sink, never lead it:

- a crash before the record (fault point ``coverage.before_record``) leaves the epoch
  out of the store; on resume the sink's ``open_partition`` reports it and the first
  commit of the new run records it;
- a crash after the record (``coverage.after_record``) but before Bytewax stores the
  epoch replays rows the target already holds: the sink skips them, and recording the
  same span again changes nothing (union).

When a sink finds its target emptied or dropped at start and drops the stale coverage
it kept there (:meth:`CoverageRecorder.forget`), the store's rows of those partitions
are deleted at the next flush, before anything is recorded again: the store never
claims offsets the target lost.

A store that is busy or unreachable (a ``TransientError``) does not stop the flow: the
coverage to record is kept and retried at every following epoch, and a warning is
logged when recording starts failing and when it recovers. Any other error stops the
flow (the data is durable either way; it replays and is skipped on resume).
"""

from __future__ import annotations

import logging

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageStore, open_coverage_store
from thalweg_bytewax.errors import ConfigError, TransientError
from thalweg_bytewax.runtime.parts import decode_part

__all__ = ["CoverageRecorder"]

logger = logging.getLogger(__name__)


class CoverageRecorder:
    """Collect one sink partition's committed coverage and merge it into a store.

    Args:
        store: The coverage store (or what :func:`~thalweg_bytewax.coverage.store.
            open_coverage_store` takes: a path or a ``postgresql://`` URL).
        sink_id: The id the sink's rows are stored under (its step id by default).
        component: The sink's name in messages.

    Attributes:
        failures: Consecutive flushes that failed with a transient store error.
    """

    __slots__ = ("_forget", "_pending", "component", "failures", "sink_id", "store")

    def __init__(self, store: CoverageStore | str, sink_id: str, component: str) -> None:
        if not isinstance(sink_id, str) or not sink_id:
            msg = f"{component}: coverage `sink_id` expected a non-empty name; got {sink_id!r}"
            raise ConfigError(msg)
        self.store = open_coverage_store(store)
        self.sink_id = sink_id
        self.component = component
        self.failures = 0
        self._pending: dict[str, OffsetCoverage] = {}
        self._forget: set[str] = set()

    def forget(self, keys: list[str]) -> None:
        """Note source partitions whose stored rows go: the target no longer holds them.

        Deleted now, before the sink drops its own stale coverage (so a crash in between
        leaves the store lagging, never leading); when the store is unreachable, at the
        next :meth:`flush`, before anything is recorded. What was noted for them before
        is dropped.

        Raises:
            ThalwegError: A non-transient store error.
        """
        for key in keys:
            self._forget.add(key)
            self._pending.pop(key, None)
        try:
            self.store.forget(self.sink_id, [decode_part(k) for k in sorted(self._forget)])
        except TransientError:
            logger.warning(
                "%s: cannot drop the stale coverage of `%s` in %s yet; retried before the "
                "next record",
                self.component,
                self.sink_id,
                self.store.describe(),
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            return
        self._forget.clear()

    def add(self, key: str, coverage: OffsetCoverage) -> None:
        """Note offsets of source partition ``key`` that are durable in the target."""
        if coverage:
            held = self._pending.get(key)
            self._pending[key] = coverage if held is None else held.union(coverage)

    def add_span(self, key: str, first: int, last: int) -> None:
        """Note the span ``first..last`` of ``key`` that an epoch just committed."""
        self.add(key, OffsetCoverage([(first, last)]))

    def flush(self) -> None:
        """Merge what was noted into the store; call only after the durable commit.

        Raises:
            ThalwegError: A non-transient store error (the flow stops; nothing is lost).
        """
        if not self._pending and not self._forget:
            return
        _faults.checkpoint("coverage.before_record")
        entries = {decode_part(key): cov for key, cov in self._pending.items()}
        try:
            if self._forget:
                # First: a record after a failed delete would be deleted with it.
                self.store.forget(self.sink_id, [decode_part(k) for k in sorted(self._forget)])
                self._forget.clear()
            self.store.record(self.sink_id, entries)
        except TransientError as exc:
            self.failures += 1
            if self.failures == 1:
                logger.warning(
                    "%s: cannot record coverage of `%s` in %s (%s); the store lags and "
                    "recording is retried at every epoch",
                    self.component,
                    self.sink_id,
                    self.store.describe(),
                    type(exc).__name__,
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
            return
        if self.failures:
            logger.warning(
                "%s: coverage of `%s` recorded again after %s failed attempts",
                self.component,
                self.sink_id,
                self.failures,
            )
            self.failures = 0
        self._pending.clear()
        _faults.checkpoint("coverage.after_record")
