"""Event-time window aggregation over Arrow batches: window specs, per-batch partials, folding.

The work is split the way a streaming engine splits it:

1. :func:`pre_aggregate` reduces one batch to *partials*: one row per (group key,
   pane) with mergeable partial aggregates (count, sum, min, max; an average is a
   (sum, count) pair), the pane's record count and its earliest and latest event time.
   It is columnar (``pyarrow`` ``group_by``), never a Python loop over rows.
2. :class:`~thalweg_bytewax.windows.fold.WindowFolder` folds the partials of one group
   key into its open windows, keeps that key's watermark, closes windows the watermark
   has passed and reports late partials. It touches one Python object per (group key,
   pane) of a batch, not per record. Its state is plain and picklable.

A *pane* is the unit a batch is pre-aggregated to, chosen so that partials merge
exactly: a tumbling window is its own pane; a sliding window of ``length`` every
``step`` uses panes of ``gcd(length, step)`` (each pane lies wholly inside every
window that contains its start); a session window with ``gap`` uses panes of ``gap``
(two records in one pane are less than ``gap`` apart, so they share a session whatever
else arrives). Windows are aligned to the Unix epoch (UTC).

**Watermark and lateness.** Per group key: the newest (clamped) event time seen for the
key minus ``allowed_lateness``. A window closes, and is emitted once, when the
watermark reaches its end (a session: its last event + ``gap``). A partial is *late*
when it arrives after a window it belongs to has closed: for tumbling and sliding
windows when its earliest window has closed (with sliding windows it still counts in
the windows still open); for sessions when it starts before the end of a closed
session or its own session would already be closed. Late partials are reported with
their record count, never silently dropped. A record without an event time (null) is
late as well. Each late row is numbered per (group key, source partition) in the
state (``late_seq``), so a row replayed after a resume carries the key it had before
and a sink that upserts on (group columns, ``source``, ``late_seq``) holds it once.
The watermark is per group key, as in Bytewax's own windowing: a key
that receives no newer data keeps its last windows open until it does or the stream
ends (at the end, every open window is emitted).

Count distinct is refused: an exact merge needs the set of values of every open
window in the state (memory proportional to the distinct values, not to the windows),
and an approximate one would not equal a batch recomputation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.required_columns import require_columns

__all__ = [
    "AGG_FUNCTIONS",
    "COUNT",
    "PANE",
    "SOURCE",
    "TMAX",
    "TMIN",
    "Session",
    "Sliding",
    "Tumbling",
    "WindowPlan",
    "WindowSpec",
    "pre_aggregate",
    "split_by_key",
]

AGG_FUNCTIONS = ("count", "sum", "min", "max", "avg")
"""The aggregate functions a window computes; each merges exactly across batches."""

_US = 1_000_000
PANE = "_twg_pane"
"""Partial column: the pane's start, µs since the epoch (null: records without event time)."""
TMIN = "_twg_tmin"
"""Partial column: the pane's earliest event time, µs."""
TMAX = "_twg_tmax"
"""Partial column: the pane's latest event time, µs."""
COUNT = "_twg_n"
"""Partial column: the pane's records."""
SOURCE = "_twg_src"
"""Partial column: the key of the input batch the partial came from (its source partition)."""


def _micros(d: timedelta, what: str) -> int:
    if not isinstance(d, timedelta) or d <= timedelta(0):
        msg = f"window: expected `{what}` to be a positive timedelta; got {d!r}"
        raise ConfigError(msg)
    return d // timedelta(microseconds=1)


@dataclass(frozen=True)
class Tumbling:
    """Fixed, non-overlapping windows of ``size``, aligned to the Unix epoch."""

    size: timedelta


@dataclass(frozen=True)
class Sliding:
    """Windows of ``length`` starting every ``step``, aligned to the Unix epoch."""

    length: timedelta
    step: timedelta


@dataclass(frozen=True)
class Session:
    """Runs of a key's records less than ``gap`` apart; a session ends ``gap`` after its last."""

    gap: timedelta


WindowSpec = Tumbling | Sliding | Session
"""The kinds of event-time window."""


@dataclass(frozen=True)
class _Partial:
    column: str | None  # None: every row (count(*))
    fn: str  # arrow hash aggregate
    merge: str  # "sum" | "min" | "max"


class WindowPlan:
    """A validated window aggregation: what to group by, which window, which aggregates.

    Args:
        window: :class:`Tumbling`, :class:`Sliding` or :class:`Session`.
        aggs: Output column -> ``(function, column)``; function one of
            :data:`AGG_FUNCTIONS`, column ``"*"`` for ``count`` of every row.
        group_by: Group key columns (may be empty: one group).
        allowed_lateness: How far behind the newest event time of its key a window may
            still take records before it closes.

    Raises:
        ConfigError: For an unknown function (``count_distinct`` included), a
            non-positive duration, a sliding step longer than its length, or an
            output name that clashes with a group column.
    """

    def __init__(
        self,
        window: WindowSpec,
        aggs: Mapping[str, tuple[str, str]],
        group_by: Sequence[str] = (),
        allowed_lateness: timedelta = timedelta(0),
    ) -> None:
        if isinstance(window, Tumbling):
            length = step = _micros(window.size, "size")
            pane = length
        elif isinstance(window, Sliding):
            length, step = _micros(window.length, "length"), _micros(window.step, "step")
            if step > length:
                msg = (
                    f"sliding window: expected `step` <= `length`; got step={window.step!r}, "
                    f"length={window.length!r}. Use Tumbling for gaps between windows"
                )
                raise ConfigError(msg)
            pane = math.gcd(length, step)
        elif isinstance(window, Session):
            length = step = pane = _micros(window.gap, "gap")
        else:
            msg = f"window: expected Tumbling, Sliding or Session; got {window!r}"
            raise ConfigError(msg)
        if not isinstance(allowed_lateness, timedelta) or allowed_lateness < timedelta(0):
            msg = (
                f"window: expected `allowed_lateness` to be a non-negative timedelta; "
                f"got {allowed_lateness!r}"
            )
            raise ConfigError(msg)
        if not aggs:
            msg = "window: expected at least one aggregate in `aggs`; got none"
            raise ConfigError(msg)
        self.window = window
        self.session = isinstance(window, Session)
        self.length, self.step, self.pane = length, step, pane
        self.lateness = allowed_lateness // timedelta(microseconds=1)
        self.group_by = tuple(group_by)
        self.aggs = dict(aggs)
        self.partials: list[_Partial] = []
        self.outputs: list[tuple[str, str, list[int]]] = []  # (name, fn, partial indexes)
        for name, spec in self.aggs.items():
            self.outputs.append((name, *self._add(name, spec)))

    def _add(self, name: str, spec: tuple[str, str]) -> tuple[str, list[int]]:
        if not (isinstance(spec, tuple) and len(spec) == 2):
            msg = f"window aggregate `{name}`: expected (function, column); got {spec!r}"
            raise ConfigError(msg)
        fn, column = spec
        if name in self.group_by:
            msg = f"window aggregate `{name}`: expected a name apart from the group columns"
            raise ConfigError(msg)
        if fn not in AGG_FUNCTIONS:
            hint = (
                "; an exact distinct count needs every value of every open window in "
                "the state, so it is refused: count distinct downstream of the windows"
                if "distinct" in str(fn)
                else ""
            )
            msg = (
                f"window aggregate `{name}`: expected a function in {list(AGG_FUNCTIONS)!r}; "
                f"got {fn!r}{hint}"
            )
            raise ConfigError(msg)
        if column == "*" and fn != "count":
            msg = f"window aggregate `{name}`: expected a column for {fn!r}; got '*'"
            raise ConfigError(msg)
        if fn == "count":
            parts = [_Partial(None, "count_all", "sum")] if column == "*" else [
                _Partial(column, "count", "sum")
            ]  # fmt: skip
        elif fn == "avg":
            parts = [_Partial(column, "sum", "sum"), _Partial(column, "count", "sum")]
        else:
            parts = [_Partial(column, fn, fn)]
        first = len(self.partials)
        self.partials.extend(parts)
        return fn, list(range(first, len(self.partials)))

    def columns(self) -> list[str]:
        """The input columns the aggregation reads (group columns and aggregated columns)."""
        wanted = [*self.group_by, *(p.column for p in self.partials if p.column)]
        return list(dict.fromkeys(wanted))


def pre_aggregate(batch: pa.RecordBatch, times_us: pa.Array, plan: WindowPlan) -> pa.Table:
    """Reduce ``batch`` to one row per (group key, pane) of mergeable partials.

    Args:
        batch: The records.
        times_us: Each record's (clamped) event time in integer microseconds since the
            epoch; null where unknown (such records form a pane of null start).
        plan: The aggregation.

    Returns:
        Group columns, ``_twg_pane`` (pane start, µs), ``_twg_tmin`` / ``_twg_tmax``
        (event time range), ``_twg_n`` (records) and ``_twg_p<i>`` per partial.

    Raises:
        ConfigError: When a column the plan reads is missing from the batch.
    """
    require_columns(batch, plan.columns(), where="window", hint=". Check `group_by` and `aggs`")
    t = times_us.cast(pa.int64())
    valid = np.asarray(t.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    raw = np.asarray(t.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    pane = pa.array((raw // plan.pane) * plan.pane, pa.int64(), mask=~valid)
    arrays = {c: batch.column(c) for c in plan.columns()}
    arrays.update({PANE: pane, "_twg_t": t})
    table = pa.table(arrays)
    specs: list[tuple[Any, ...]] = [
        ("_twg_t", "min"),
        ("_twg_t", "max"),
        ([], "count_all"),
    ]
    for p in plan.partials:
        if p.column is None:
            specs.append(([], "count_all"))
        elif p.fn == "count":
            specs.append((p.column, "count", pc.CountOptions(mode="only_valid")))
        else:
            specs.append((p.column, p.fn, pc.ScalarAggregateOptions(min_count=1)))
    out = table.group_by([*plan.group_by, PANE], use_threads=False).aggregate(specs)
    # aggregate() returns the keys, then the aggregates in order (pyarrow >= 15).
    names = [TMIN, TMAX, COUNT, *(f"_twg_p{i}" for i in range(len(plan.partials)))]
    return out.rename_columns([*plan.group_by, PANE, *names])


def split_by_key(partials: pa.Table, group_by: Sequence[str]) -> list[tuple[str, pa.RecordBatch]]:
    """The partials of each group key, keyed by a routing string of the group's values.

    The key is ``repr`` of the tuple of group values: equal groups get equal keys, and
    distinct groups distinct ones for the value types Arrow converts to (str, numbers,
    dates, bytes, None). One Python step per partial row, never per record.
    """
    if partials.num_rows == 0:
        return []
    if not group_by:
        return [("()", b) for b in partials.combine_chunks().to_batches()]
    rows = zip(*(partials.column(c).to_pylist() for c in group_by), strict=True)
    index: dict[str, list[int]] = {}
    for i, values in enumerate(rows):
        index.setdefault(repr(values), []).append(i)
    out = []
    for key, idx in index.items():
        taken = partials.take(pa.array(idx, pa.int64())).combine_chunks()
        out.append((key, taken.to_batches()[0]))
    return out
