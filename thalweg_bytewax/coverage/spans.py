"""Coverage: the source offsets a sink holds, as gap-aware ranges merged by union.

A sink's coverage of one source partition is a set of inclusive offset spans
``[first, last]``. It is merged by union and never last-write-wins: two records of what
a sink holds (its own listing, a resume position, an epoch it just committed) only ever
add to each other, so concurrent writers cannot erase each other's progress. Coverage
may lag what a sink holds, never lead it: a lagging coverage costs a replay that the
sink absorbs, a leading one loses records for good.

:class:`OffsetCoverage` is an immutable interval set of one (topic, partition): adding
returns a new set; membership is answered per offset or, vectorised with
``numpy.searchsorted``, for a whole Arrow offsets column; ``uncovered(first, last)``
and ``gaps()`` report exactly what is missing; ``to_list`` / ``from_list`` turn it into
plain lists for snapshots and files. :func:`find_replay_conflict` checks replayed rows
against the record ids a sink holds at their offsets, so a recreated topic is not
mistaken for a replay. Nothing here imports Bytewax.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["OffsetCoverage", "Span", "find_replay_conflict", "replacement_verdicts"]

Span = tuple[int, int]
"""An inclusive span of offsets, ``(first, last)`` with ``first <= last``."""


def _as_offset(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        msg = f"offset coverage: span `{name}` expected an integer; got {value!r}"
        raise ConfigError(msg)
    return int(value)


def _check_span(first: object, last: object) -> Span:
    lo, hi = _as_offset("first", first), _as_offset("last", last)
    if lo > hi:
        msg = (
            f"offset coverage: span expected `first <= last`; got ({lo}, {hi}) "
            f"(spans are inclusive: one offset is `(n, n)`)"
        )
        raise ConfigError(msg)
    return lo, hi


def _merge(spans: list[Span]) -> tuple[Span, ...]:
    """Sort spans and merge the overlapping or adjacent ones."""
    spans.sort()
    merged: list[Span] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return tuple(merged)


class OffsetCoverage:
    """An immutable set of source offsets, held as sorted, disjoint, non-adjacent spans.

    Example::

        cov = OffsetCoverage([(0, 99)]).add(150, 199)
        cov.covers(120)             # False
        cov.uncovered(90, 160)      # [(100, 149)]
        cov.gaps()                  # [(100, 149)]
        OffsetCoverage.from_list(cov.to_list()) == cov   # True

    Args:
        spans: Inclusive ``(first, last)`` spans, in any order, overlapping or not.

    Raises:
        ConfigError: When a span is not two integers with ``first <= last``.
    """

    __slots__ = ("_ends", "_spans", "_starts")

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        checked = [_check_span(*span) for span in spans]
        self._spans = _merge(checked)
        self._starts: NDArray[np.int64] | None = None
        self._ends: NDArray[np.int64] | None = None

    @property
    def spans(self) -> tuple[Span, ...]:
        """The spans, sorted, disjoint and non-adjacent."""
        return self._spans

    @property
    def first(self) -> int | None:
        """The lowest covered offset, or None when nothing is covered."""
        return self._spans[0][0] if self._spans else None

    @property
    def last(self) -> int | None:
        """The highest covered offset, or None when nothing is covered."""
        return self._spans[-1][1] if self._spans else None

    @property
    def size(self) -> int:
        """How many offsets are covered."""
        return sum(hi - lo + 1 for lo, hi in self._spans)

    def add(self, first: int, last: int) -> OffsetCoverage:
        """The union of this coverage and the span ``[first, last]``."""
        return OffsetCoverage([*self._spans, _check_span(first, last)])

    def union(self, other: OffsetCoverage) -> OffsetCoverage:
        """Every offset covered by either: merged by union, never last-write-wins."""
        if not isinstance(other, OffsetCoverage):
            msg = f"offset coverage: `union` expected an OffsetCoverage; got {type(other).__name__}"
            raise ConfigError(msg)
        if not other.spans:
            return self
        if not self._spans:
            return other
        if len(other.spans) == 1:
            # The common case, once a batch: a span at or past the last one (the next
            # offsets of one stream), merged without sorting or checking again.
            lo, hi = other.spans[0]
            last_lo, last_hi = self._spans[-1]
            if lo > last_hi + 1:
                return OffsetCoverage._merged((*self._spans, (lo, hi)))
            if lo >= last_lo:
                return OffsetCoverage._merged((*self._spans[:-1], (last_lo, max(hi, last_hi))))
        return OffsetCoverage([*self._spans, *other.spans])

    @classmethod
    def _merged(cls, spans: tuple[Span, ...]) -> OffsetCoverage:
        """A coverage of spans already checked, sorted, disjoint and non-adjacent."""
        coverage = cls()
        coverage._spans = spans  # noqa: SLF001 - its own class: spans known to be valid
        return coverage

    __or__ = union

    def _index(self, offset: int) -> int:
        """The index of the last span starting at or before ``offset`` (-1 if none)."""
        return bisect.bisect_right(self._spans, (offset, np.iinfo(np.int64).max)) - 1

    def covers(self, offset: int) -> bool:
        """Whether ``offset`` is covered."""
        i = self._index(offset)
        return i >= 0 and offset <= self._spans[i][1]

    def overlaps(self, first: int, last: int) -> bool:
        """Whether any offset of ``[first, last]`` is covered."""
        lo, hi = _check_span(first, last)
        i = self._index(hi)
        return i >= 0 and self._spans[i][1] >= lo

    def uncovered(self, first: int, last: int) -> list[Span]:
        """The spans of ``[first, last]`` that are not covered, in order."""
        lo, hi = _check_span(first, last)
        out: list[Span] = []
        cursor = lo
        start = max(self._index(lo), 0)
        for a, b in self._spans[start:]:
            if a > hi:
                break
            if b < cursor:
                continue
            if a > cursor:
                out.append((cursor, a - 1))
            cursor = b + 1
            if cursor > hi:
                return out
        if cursor <= hi:
            out.append((cursor, hi))
        return out

    def gaps(self) -> list[Span]:
        """The holes between the first and the last covered offset, in order."""
        return [(a[1] + 1, b[0] - 1) for a, b in zip(self._spans, self._spans[1:], strict=False)]

    def _arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        if self._starts is None or self._ends is None:
            self._starts = np.fromiter((a for a, _ in self._spans), np.int64, len(self._spans))
            self._ends = np.fromiter((b for _, b in self._spans), np.int64, len(self._spans))
        return self._starts, self._ends

    def mask(self, offsets: pa.Array | pa.ChunkedArray | NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which of ``offsets`` are covered, as a boolean array (vectorised, no row loop).

        Args:
            offsets: An integer Arrow array or column without nulls, or a numpy array.
        """
        values = _to_numpy(offsets)
        if not self._spans or values.size == 0:
            return np.zeros(values.shape, dtype=np.bool_)
        starts, ends = self._arrays()
        idx = np.searchsorted(starts, values, side="right") - 1
        inside = idx >= 0
        return inside & (values <= ends[np.maximum(idx, 0)])

    def to_list(self) -> list[list[int]]:
        """The spans as plain lists, ``[[first, last], ...]`` (for snapshots and files)."""
        return [[a, b] for a, b in self._spans]

    @classmethod
    def from_list(cls, data: Sequence[Sequence[int]]) -> OffsetCoverage:
        """Rebuild a coverage from :meth:`to_list` output.

        Raises:
            ConfigError: When ``data`` is not a list of ``[first, last]`` integer pairs.
        """
        if isinstance(data, str | bytes) or not isinstance(data, Sequence):
            msg = f"offset coverage: expected a list of `[first, last]` pairs; got {data!r}"
            raise ConfigError(msg)
        spans: list[Span] = []
        for item in data:
            if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 2:
                msg = f"offset coverage: expected a `[first, last]` pair; got {item!r}"
                raise ConfigError(msg)
            spans.append((item[0], item[1]))
        return cls(spans)

    @classmethod
    def checked(cls, value: object, where: str) -> OffsetCoverage:
        """``value`` itself, when it is an ``OffsetCoverage`` (a plan a caller handed in).

        Args:
            value: What the caller passed where a coverage belongs.
            where: Who and what messages name, e.g. ``"coverage store: `orders` `('t', 0)`"``.

        Raises:
            ConfigError: ``"<where> expected an OffsetCoverage; got <type>"`` for anything
                else (a list of spans, a dict).
        """
        if not isinstance(value, cls):
            msg = f"{where} expected an OffsetCoverage; got {type(value).__name__}"
            raise ConfigError(msg)
        return value

    def __iter__(self) -> Iterator[Span]:
        return iter(self._spans)

    def __bool__(self) -> bool:
        return bool(self._spans)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetCoverage):
            return NotImplemented
        return self._spans == other._spans

    def __hash__(self) -> int:
        return hash(self._spans)

    def __repr__(self) -> str:
        return f"OffsetCoverage({list(self._spans)!r})"


def _to_numpy(offsets: pa.Array | pa.ChunkedArray | NDArray[np.int64]) -> NDArray[np.int64]:
    if isinstance(offsets, np.ndarray):
        return offsets.astype(np.int64, copy=False)
    if isinstance(offsets, pa.ChunkedArray):
        offsets = offsets.combine_chunks()
    if offsets.null_count:
        msg = f"offset coverage: offsets expected no nulls; got {offsets.null_count} null offsets"
        raise ConfigError(msg)
    return np.asarray(offsets.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def find_replay_conflict(
    offsets: pa.Array | pa.ChunkedArray,
    record_ids: pa.Array | pa.ChunkedArray,
    held_offsets: pa.Array | pa.ChunkedArray,
    held_record_ids: pa.Array | pa.ChunkedArray,
) -> int | None:
    """The lowest replayed offset a sink holds under another record id, or None.

    Offsets alone cannot tell a replay from a topic that was deleted and recreated
    (offsets restart at 0) or a target written from another cluster; the record id
    covers cluster, topic, partition, offset and payload. A replayed row conflicts when
    the sink holds its offset but not its (offset, record id) pair; rows without a record
    id (a null, on either side) are not compared. An offset the sink
    never held is no conflict: the first run did not write that row there (a sparse
    lane, or a time-dependent step upstream), and skipping it keeps that decision.
    Columnar: one hash join, no loop per row.

    Args:
        offsets: Offsets of the replayed rows.
        record_ids: Their record ids, row for row.
        held_offsets: Offsets the sink holds in the replayed range.
        held_record_ids: The record ids it holds there, row for row.
    """
    if len(offsets) == 0 or len(held_offsets) == 0:
        return None
    # A row without a record id (on either side) cannot be verified: it is no evidence of
    # a conflict, so only rows carrying an id on both sides are compared.
    replayed = pa.table({"o": offsets, "r": record_ids}).filter(pc.is_valid(record_ids))
    held_ids = held_record_ids.cast(record_ids.type)
    held = pa.table({"o": held_offsets, "r": held_ids}).filter(pc.is_valid(held_ids))
    if replayed.num_rows == 0 or held.num_rows == 0:
        return None
    unmatched = replayed.join(held, keys=["o", "r"], join_type="left anti")
    clash = unmatched.filter(pc.is_in(unmatched.column("o"), value_set=held.column("o")))
    if clash.num_rows == 0:
        return None
    low: int = pc.min(clash.column("o")).as_py()
    return low


# replacement_verdicts' answers by rank: a replaced row outranks an unknown one, and that
# one a missing one, when a key has several rows in the target.
_VERDICT_OF_RANK = np.array([0, -1, 1], dtype=np.int8)


def replacement_verdicts(
    offsets: pa.Array | pa.ChunkedArray,
    asked: pa.Array | pa.ChunkedArray,
    held: pa.Table,
    columns: MetadataColumns,
    topic: str,
    partition: int,
) -> NDArray[np.int8]:
    """Whether a later row of each replayed row's key replaced it, from the target's rows.

    The answer of ``EpochSinkPartition.replaced_by_key``, one ``int8`` per replayed row:
    ``1`` where the target holds its key from a later offset of source partition
    ``topic:partition`` (it was replaced), ``-1`` where from another source or without
    an offset (nothing orders the two), ``0`` where not at all or only from earlier
    offsets (the target never got it). Columnar.

    Args:
        offsets: The replayed rows' offsets (all from ``topic:partition``).
        asked: For each row of ``held``, the index of the replayed row whose key it has.
        held: The target's rows of those keys: their topic, partition and offset columns.
        columns: The metadata column names.
        topic: The replayed rows' topic.
        partition: Their partition.
    """
    at = _to_numpy(asked)
    later = pc.greater(held.column(columns.source_offset), pa.array(_to_numpy(offsets)[at]))
    same = pc.and_(
        pc.and_(
            pc.equal(held.column(columns.source_topic), topic),
            pc.equal(held.column(columns.source_partition), partition),
        ),
        pc.is_valid(held.column(columns.source_offset)),
    ).fill_null(False)
    is_later = np.asarray(later.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    is_same = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
    rank = np.where(is_same, np.where(is_later, 2, 0), 1).astype(np.int8)
    best = np.zeros(len(offsets), dtype=np.int8)
    np.maximum.at(best, at, rank)
    return _VERDICT_OF_RANK[best]
