"""Private: what an epoch sink knows of each source partition, and its replay check.

After a resume, rows whose offsets the committed coverage holds are skipped as
replays. That is sound only where the target holds them: :class:`ReplayCheck` reads the
target back over the replayed stretch and sorts the covered rows it lacks into
replays, rows a step before the sink held across epochs (refused), and rows it cannot
tell apart (skipped, with a warning). :mod:`thalweg_bytewax.runtime.epoch_sink` owns the
protocol and calls it; the hooks it reads (``held_record_ids``, ``replaced_by_key``,
``describe_target``) are the sink's.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.coverage.spans import OffsetCoverage, find_replay_conflict
from thalweg_bytewax.errors import ConfigError, SinkTerminalError
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["Ledger", "ReplayCheck"]

# The warnings keep the protocol's logger: a flow's logging set-up names that one.
logger = logging.getLogger("thalweg_bytewax.runtime.epoch_sink")

# How far past a replayed batch one read of the target reaches (offsets): the batches of
# a replay share a read, and a rewind far below the resumed state holds at most this
# many (offset, record id) pairs at a time.
_READ_AHEAD = 100_000


class Ledger:
    """What the base knows about one source partition of this sink partition."""

    __slots__ = (
        "accepted_last",
        "coverage",
        "held",
        "next_offset",
        "pending",
        "replay_end",
        "resumed_next",
        "target_first",
        "verified",
        "warned_unchecked",
    )

    def __init__(
        self,
        coverage: OffsetCoverage,
        next_offset: int,
        resumed_next: int | None = None,
        replay_end: int | None = None,
        target_first: int | None = None,
    ) -> None:
        self.coverage = coverage
        self.next_offset = next_offset
        # The next offset in the state Bytewax resumed this sink with (None: no state):
        # the source resumes at or past it, so it never replays a row below it.
        self.resumed_next = resumed_next
        # After a resume, the offset below which covered rows are checked against the
        # target: past the resumed state and everything the target held at the start.
        self.replay_end = replay_end
        # The lowest offset the target held at the start (None: nothing). Below it the
        # target keeps nothing to check against (retention removed it, or never had it).
        self.target_first = target_first
        # The last read of the target: (first, last, what it holds there or None).
        self.held: tuple[int, int, pa.Table | None] | None = None
        self.accepted_last: int | None = None  # the highest offset accepted this run
        # The offsets staged since the last commit: each group's span and each input
        # span accounted for whole, never the holes between them (rows of a hole may
        # have gone to another shard and been refused there).
        self.pending: OffsetCoverage | None = None
        self.verified = False  # the first skipped rows were checked by record id
        # Why covered rows after a resume could not be checked, each warned about once.
        self.warned_unchecked: set[str] = set()


class _Sink(Protocol):
    """What the replay check reads of the sink partition it serves."""

    @property
    def component(self) -> str: ...

    @property
    def columns(self) -> MetadataColumns: ...

    @property
    def target_replaces_rows(self) -> bool: ...

    @property
    def replay_remedy(self) -> str: ...

    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None: ...

    def replaced_by_key(self, key: str, rows: pa.RecordBatch) -> np.ndarray | None: ...

    def describe_target(self, key: str) -> str: ...


class ReplayCheck:
    """The covered rows of a sink partition: skipped, and checked against its target.

    Args:
        sink: The sink partition: its names, columns and read-back hooks.
    """

    def __init__(self, sink: _Sink) -> None:
        self._sink = sink

    def check(self, ledger: Ledger, key: str, rows: pa.RecordBatch) -> np.ndarray:
        """After a resume, check covered rows against the target before they are skipped.

        A covered row is skipped as a replay, which is sound only if the target holds
        it. Rows the target holds are replays (a source that rewinds, the epoch the
        recovery store lost) and are skipped; the first ones are checked by record id.

        **Below the resumed state** a row the target does not hold is refused: the
        source resumes at or past the offsets this sink had committed by the resumed
        epoch, so such a row was held by a step before the sink across epochs (a
        stateful operator that delays rows). The run before the crash refused the same
        order (``EpochSinkPartition._check_order``), but in the resumed run the row
        comes first, inside the coverage, and skipping it would lose it silently.

        **Above it, inside what the target committed after the resumed epoch** (the
        crash fell between the target's commit and the recovery store's), a row the
        target does not hold is either such a held row or one a time-dependent rule
        rejected before the crash and passes now, which must stay out (it is in the
        DLQ). The two cannot be told apart here, so it is skipped, with a warning that
        names the offsets: refusing would stop every resume of a flow with such a rule.

        A target that replaces rows by key (upserts) no longer holds the offset of a
        row that a later row of its key replaced: the keys of the rows it does not hold
        are looked up (``replaced_by_key``), replaced rows are replays, and the rest
        are judged as above.

        The target is read once over the checked stretch, up to ``_READ_AHEAD`` offsets
        at a time, not once per batch. Covered rows are skipped with a warning where the
        target cannot be read back, below the lowest offset it held at the start (the
        resumed state covers them; retention removed the rest), or where an upsert
        target cannot look a key up or holds the key's row from another source.
        Returns the rows' coverage mask, which the skip that follows reuses.
        """
        offsets = rows.column(self._sink.columns.source_offset)
        covered = ledger.coverage.mask(offsets)
        if not covered.any():
            return covered
        suspects = offsets.filter(pa.array(covered))
        bounds = pc.min_max(suspects)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        first = ledger.target_first
        if first is None or low < first:  # covered by the resumed state only: nothing there
            self._warn_unchecked(ledger, key, low, "cannot be read back to check them")
            if first is None or high < first:
                return covered
            suspects = suspects.filter(pc.greater_equal(suspects, first))
            low = first
        held = self._held_over(ledger, key, low, high)
        if held is None:
            self._warn_unchecked(ledger, key, low, "cannot be read back to check them")
            return covered
        held_offsets = held.column(self._sink.columns.source_offset).combine_chunks()
        held_offsets = held_offsets.cast(suspects.type)
        missing = suspects.filter(pc.invert(pc.is_in(suspects, value_set=held_offsets)))
        if len(missing) and self._sink.target_replaces_rows:
            not_replaced = self._not_replaced(ledger, key, rows, missing)
            if not_replaced is None:
                return covered
            missing = not_replaced
        if len(missing) == 0:
            if not ledger.verified:  # the replay's record ids, from the same read
                ledger.verified = True
                self.verify(key, rows.filter(pa.array(covered)), held)
            return covered
        resumed = ledger.resumed_next or 0
        below = missing.filter(pc.less(missing, resumed))
        if len(below) == 0:
            span = pc.min_max(missing)
            logger.warning(
                "%s: %s rows of `%s` at offsets %s-%s arrived after a resume inside what %s "
                "committed after the resumed epoch, and it does not hold them: skipped. A "
                "rule that rejected them before the crash and passes them now (they are in "
                "the DLQ) is one cause; a step before the sink that delays rows across "
                "epochs is the other, and then these rows are lost: keep each source "
                "partition's rows in offset order before a sink",
                self._sink.component,
                len(missing),
                key,
                span["min"].as_py(),
                span["max"].as_py(),
                self._sink.describe_target(key),
            )
            return covered
        msg = (
            f"{self._sink.component}: rows of `{key}` from offset {pc.min(below).as_py()} "
            f"({len(below)} in this batch) arrived after a resume, below the offsets this sink "
            f"had committed (up to {resumed - 1}), and {self._sink.describe_target(key)} does not "
            f"hold them. The source resumes past those offsets, so a step before the sink "
            f"held these rows across epochs (a stateful operator that delays rows); skipped "
            f"as replays, they would be lost. Nothing was skipped or written. A sink needs "
            f"the rows of each source partition in offset order: do not delay some rows of "
            f"a partition past later ones before a sink, or drop the locator columns and "
            f"write them with locators='absent'"
        )
        raise ConfigError(msg)

    def uncovered(
        self,
        ledger: Ledger,
        key: str,
        rows: pa.RecordBatch,
        first: int,
        last: int,
        covered: np.ndarray | None = None,
    ) -> pa.RecordBatch:
        """The rows whose offsets the committed coverage does not hold (``covered``: their mask).

        The first rows skipped of a source partition are checked against the target
        (:meth:`verify`).
        """
        if covered is None:
            if not ledger.coverage.overlaps(first, last):
                return rows
            covered = ledger.coverage.mask(rows.column(self._sink.columns.source_offset))
        if not covered.any():
            return rows
        if not ledger.verified:
            ledger.verified = True
            self.verify(key, rows.filter(pa.array(covered)))
        return rows.filter(pa.array(~covered))

    def _not_replaced(
        self, ledger: Ledger, key: str, rows: pa.RecordBatch, missing: pa.Array
    ) -> pa.Array | None:
        """Of the ``missing`` offsets, those whose key the target holds no later row of.

        An upsert target no longer holds the offset of a row that a later row of its
        key replaced: such rows are replays. Rows whose key's row comes from another
        source are skipped with a warning; None (every row skipped with it) when the
        target cannot look keys up.
        """
        offsets = rows.column(self._sink.columns.source_offset)
        asked = rows.filter(pc.is_in(offsets, value_set=missing))
        verdict = self._sink.replaced_by_key(key, asked)
        asked_offsets = asked.column(self._sink.columns.source_offset)
        unknown = None if verdict is None else verdict < 0
        if verdict is None or unknown is not None and unknown.any():
            low = pc.min(asked_offsets if unknown is None else asked_offsets.filter(unknown))
            self._warn_unchecked(
                ledger, key, low.as_py(), "replaces rows by key, and cannot tell a row a "
                "later row of its key replaced from one it never got"
            )
        if verdict is None:
            return None
        return asked_offsets.filter(pa.array(verdict == 0))

    def _held_over(self, ledger: Ledger, key: str, low: int, high: int) -> pa.Table | None:
        """What the target holds over ``[low, high]``: from the last read when it spans them.

        A read reaches ahead to the end of the checked stretch, at most ``_READ_AHEAD``
        offsets past ``low``, so the batches of one replay share it; when that finds
        nothing, it reaches to the end of the stretch.
        """
        cached = ledger.held
        if cached is not None and cached[0] <= low and high <= cached[1]:
            return cached[2]
        end = ledger.replay_end if ledger.replay_end is not None else high + 1
        last = max(high, min(end - 1, low + _READ_AHEAD - 1))
        held = self._sink.held_record_ids(key, low, last)
        if held is None and last < end - 1:
            # Nothing there: a gap between what the target holds, at a held-back row
            # perhaps. Whether it holds anything up to the end of the stretch tells.
            last = end - 1
            held = self._sink.held_record_ids(key, low, last)
        ledger.held = (low, last, held)
        return held

    def _warn_unchecked(self, ledger: Ledger, key: str, low: int, why: str) -> None:
        if why in ledger.warned_unchecked:
            return
        ledger.warned_unchecked.add(why)
        logger.warning(
            "%s: rows of `%s` from offset %s arrived after a resume inside the offsets it "
            "had committed, and %s %s: they are skipped as replays. If a step before the "
            "sink delays rows across epochs, those rows are lost",
            self._sink.component,
            key,
            low,
            self._sink.describe_target(key),
            why,
        )

    def verify(
        self, key: str, skipped: pa.RecordBatch, held: pa.Table | None = None
    ) -> None:
        """Check once per source partition that skipped rows really are in the target.

        ``held`` is what the target holds over their range when already read back.
        """
        rid, off = self._sink.columns.record_id, self._sink.columns.source_offset
        if rid not in skipped.schema.names:
            return
        if held is None:
            bounds = pc.min_max(skipped.column(off))
            held = self._sink.held_record_ids(key, bounds["min"].as_py(), bounds["max"].as_py())
        if held is None or held.num_rows == 0:
            return  # covered by the resume state only, or the sink cannot read back
        offset = find_replay_conflict(
            skipped.column(off), skipped.column(rid), held.column(off), held.column(rid)
        )
        if offset is not None:
            msg = (
                f"{self._sink.component}: {self._sink.describe_target(key)} holds a different "
                f"record at offset {offset} (its record id differs): the topic was deleted and "
                f"recreated, or the target belongs to another cluster. Nothing was skipped "
                f"or written; {self._sink.replay_remedy}"
            )
            raise SinkTerminalError(msg)
