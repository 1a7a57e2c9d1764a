"""What an epoch sink partition knows of its source partitions' offsets: coverage.

Per source partition a :class:`~thalweg_bytewax.coverage._replay_check.Ledger` holds the
committed coverage (what ``open_partition`` reported, plus everything below the resumed
offset), the offsets staged since the last commit, and where a replay ends. Sinks read
it to name what they write within one pending span; the coverage store is fed from it.
Private to :mod:`thalweg_bytewax.runtime.epoch_sink`, whose
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition` mixes
:class:`EpochCoverage` in.
"""

from __future__ import annotations

import logging
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.coverage._replay_check import Ledger
from thalweg_bytewax.coverage.recording import CoverageRecorder
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.records import MetadataColumns

__all__ = ["EpochCoverage", "widen"]

logger = logging.getLogger("thalweg_bytewax.runtime.epoch_sink")


class _Partition(Protocol):
    """What the coverage methods read of the partition they are mixed into."""

    component: str
    columns: MetadataColumns
    _ledgers: dict[str, Ledger]
    _resume: dict[str, int]
    _recorder: CoverageRecorder | None
    _lost_keys: set[str]

    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage: ...

    def pending_coverage(self, key: str) -> OffsetCoverage | None: ...


class EpochCoverage:
    """The coverage of an epoch sink partition: committed, pending, recorded."""

    _recorder: CoverageRecorder | None

    def record_coverage_to(self: _Partition, store: CoverageStore | str, sink_id: str) -> None:
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

    def target_lost(self: _Partition, keys: list[str]) -> None:
        """Say the target no longer holds what it covered of source partitions ``keys``.

        A sink calls it when its start check finds the target emptied or dropped and it
        drops the stale coverage it kept there: the coverage store's rows of ``keys``
        are deleted before anything is recorded again (the store never leads).
        """
        self._lost_keys.update(keys)
        if self._recorder is not None:
            self._recorder.forget(list(keys))

    def resumed_offset(self: _Partition, key: str) -> int | None:
        """The next offset of ``key`` in the state Bytewax resumed this partition with.

        The source resumes at or past it, so offsets below it are never replayed; None
        when the partition resumed without state for ``key``.
        """
        return self._resume.get(key)

    @property
    def coverage_recorder(self: _Partition) -> CoverageRecorder | None:
        """The recorder into the coverage store, or None when the sink records none."""
        return self._recorder

    def pending_coverage(self: _Partition, key: str) -> OffsetCoverage | None:
        """The offsets of ``key`` staged since the last commit, else None.

        What the next commit records as covered: each staged group's span and each
        input span accounted for whole, merged where adjacent, never the holes between
        them. ``stage()`` names what it writes within one of these spans: rows of a hole
        may have reached another shard and been refused there, and a file or table
        lineage named across it would claim them.
        """
        ledger = self._ledgers.get(key)
        return ledger.pending if ledger is not None else None

    def in_one_pending_span(self: _Partition, key: str, first: int, last: int) -> bool:
        """Whether ``first..last`` lies inside one span of ``key``'s pending coverage.

        A sink names a file or a range only across such offsets; where this is False,
        it starts a new file (``stage()`` of the lane sinks).
        """
        pending = self.pending_coverage(key)
        return pending is not None and not pending.uncovered(first, last)

    def pending_pieces(
        self: _Partition, key: str, rows: pa.RecordBatch
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

    def coverage(self: _Partition, key: str) -> OffsetCoverage | None:
        """The committed coverage of a source partition this run has met, else None."""
        ledger = self._ledgers.get(key)
        return ledger.coverage if ledger is not None else None

    def _ledger(self: _Partition, key: str, topic: str, partition: int) -> Ledger:
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


def widen(pending: OffsetCoverage | None, spans: list[tuple[int, int]]) -> OffsetCoverage:
    """The pending offsets with ``spans`` added (merged where adjacent)."""
    added = OffsetCoverage(spans)
    return added if pending is None else pending.union(added)
