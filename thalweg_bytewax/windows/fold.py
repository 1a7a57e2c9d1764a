"""Folding window partials per group key: open windows, the watermark, closing, lateness.

:class:`WindowFolder` is the state of one group key in ``window_agg``: it folds the
partials :func:`~thalweg_bytewax.windows.aggregate.pre_aggregate` computed for the key's
panes into its open windows, keeps the key's watermark, emits the windows the watermark
has passed and reports late partials (see :mod:`thalweg_bytewax.windows.aggregate` for
the rules).
It touches one Python object per (group key, pane) of a batch, never one per record,
and its state is plain and picklable (:meth:`WindowFolder.snapshot`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from thalweg_bytewax.errors import ThalwegError
from thalweg_bytewax.windows.aggregate import COUNT, PANE, SOURCE, TMAX, TMIN, WindowPlan

__all__ = ["LATE_KEY", "WindowFolder", "late_schema"]

_TS = pa.timestamp("us", tz="UTC")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


LATE_KEY = ("source", "late_seq")
"""Late columns that, after the group columns, identify a late row across replays."""


def late_schema(partials: pa.Schema, group_by: Sequence[str]) -> pa.Schema:
    """The late side stream's schema.

    Group columns, ``source`` (the source partition the late records came from, e.g.
    ``"orders:3"``), ``late_seq`` (the row's number among its group key's late rows from
    that source partition, from 0), the event time range, the records and the watermark
    they missed. (group columns, ``source``, ``late_seq``) is unique and the same when
    a resume replays the input: the key to upsert late rows on.
    """
    fields = [partials.field(c) for c in group_by]
    return pa.schema(
        [
            *fields,
            pa.field("source", pa.string(), nullable=False),
            pa.field("late_seq", pa.int64(), nullable=False),
            pa.field("event_time_min", _TS),
            pa.field("event_time_max", _TS),
            pa.field("late_records", pa.int64(), nullable=False),
            pa.field("watermark", _TS),
        ]
    )


def _merge(op: str, a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if op == "sum":
        return a + b
    return min(a, b) if op == "min" else max(a, b)


def _ts(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + timedelta(microseconds=us)


class WindowFolder:
    """One group key's open windows, its watermark and what it has closed; see the module doc.

    Args:
        plan: The aggregation.
        state: A :meth:`snapshot` to resume from.
    """

    def __init__(self, plan: WindowPlan, state: tuple[Any, ...] | None = None) -> None:
        self._plan = plan
        self._merges = ["min", "max", "sum", *(p.merge for p in plan.partials)]
        # accumulator: [tmin, tmax, n, p0, p1, ...]
        self._open: dict[int, list[Any]] = {}  # window start -> acc (tumbling / sliding)
        self._sessions: list[list[Any]] = []  # accs, sorted by tmin (sessions)
        self.watermark: float = float("-inf")
        self._closed_until: float = float("-inf")
        self._group: tuple[Any, ...] | None = None
        self._schema: pa.Schema | None = None
        self._late_seq: dict[str, int] = {}  # source partition -> late rows emitted
        if state is not None:
            wm, closed, group, schema, opened, sessions = state[:6]
            self.watermark, self._closed_until = wm, closed
            self._group, self._schema = group, schema
            self._open = {s: list(a) for s, a in opened}
            self._sessions = [list(a) for a in sessions]
            # State of earlier versions has no late numbering: it starts at 0.
            self._late_seq = dict(state[6]) if len(state) > 6 else {}  # noqa: PLR2004

    def __len__(self) -> int:
        return len(self._open) + len(self._sessions)

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable copy of the state for recovery."""
        return (
            self.watermark,
            self._closed_until,
            self._group,
            self._schema,
            tuple((s, tuple(a)) for s, a in self._open.items()),
            tuple(tuple(a) for a in self._sessions),
            tuple(sorted(self._late_seq.items())),
        )

    def _fold_into(self, acc: list[Any], row: Sequence[Any]) -> None:
        for i, op in enumerate(self._merges):
            acc[i] = _merge(op, acc[i], row[i])

    def fold(self, partials: pa.RecordBatch) -> tuple[pa.RecordBatch | None, pa.RecordBatch | None]:
        """Fold one batch's partials of this key; the windows it closes and its late partials.

        Returns:
            ``(closed, late)``: closed windows as one batch (or ``None``), and one row
            per late partial (or ``None``).
        """
        plan = self._plan
        if self._schema is None:
            self._schema = partials.schema
            self._group = tuple(partials.column(c)[0].as_py() for c in plan.group_by)
        names = [TMIN, TMAX, COUNT, *(f"_twg_p{i}" for i in range(len(plan.partials)))]
        panes = partials.column(PANE).to_pylist()
        rows = list(zip(*(partials.column(n).to_pylist() for n in names), strict=True))
        wm = self.watermark
        late: list[tuple[Any, ...]] = []
        for start, row in zip(panes, rows, strict=True):
            if start is None:
                late.append(row)
            elif plan.session:
                tmin, tmax = row[0], row[1]
                if tmin < self._closed_until or tmax + plan.length <= wm:
                    late.append(row)
                else:
                    self._join_session(list(row))
            else:
                first = (start // plan.step) * plan.step
                starts = range(first, start - plan.length, -plan.step)
                if starts[-1] + plan.length <= wm:
                    late.append(row)
                for s in starts:
                    if s + plan.length > wm:
                        acc = self._open.get(s)
                        if acc is None:
                            self._open[s] = list(row)
                        else:
                            self._fold_into(acc, row)
        newest = max((r[1] for r in rows if r[1] is not None), default=None)
        if newest is not None:
            self.watermark = max(wm, float(newest - plan.lateness))
        source = partials.column(SOURCE)[0].as_py() if SOURCE in partials.schema.names else ""
        return self._close(self.watermark), self._late_batch(late, wm, str(source))

    def _join_session(self, acc: list[Any]) -> None:
        gap = self._plan.length
        keep: list[list[Any]] = []
        for s in self._sessions:
            if acc[0] < s[1] + gap and s[0] < acc[1] + gap:
                self._fold_into(acc, s)
            else:
                keep.append(s)
        keep.append(acc)
        keep.sort(key=lambda a: a[0])
        self._sessions = keep

    def flush(self) -> pa.RecordBatch | None:
        """Close every open window (the stream ended)."""
        return self._close(float("inf"))

    def _close(self, wm: float) -> pa.RecordBatch | None:
        plan = self._plan
        done: list[tuple[int, int, list[Any]]] = []
        if plan.session:
            still = []
            for s in self._sessions:
                if s[1] + plan.length <= wm:
                    done.append((s[0], s[1] + plan.length, s))
                    self._closed_until = max(self._closed_until, float(s[1] + plan.length))
                else:
                    still.append(s)
            self._sessions = still
        else:
            for start in sorted(s for s in self._open if s + plan.length <= wm):
                done.append((start, start + plan.length, self._open.pop(start)))
        return self._result(done) if done else None

    def _meta(self) -> tuple[tuple[Any, ...], pa.Schema]:
        if self._group is None or self._schema is None:  # only before the first fold
            msg = "window folder: expected a fold before a result; got none"
            raise ThalwegError(msg)
        return self._group, self._schema

    def _result(self, done: list[tuple[int, int, list[Any]]]) -> pa.RecordBatch:
        plan = self._plan
        group, schema = self._meta()
        cols: dict[str, pa.Array] = {}
        n = len(done)
        for c, v in zip(plan.group_by, group, strict=True):
            cols[c] = pa.array([v] * n, schema.field(c).type)
        cols["window_start"] = pa.array([_ts(s) for s, _, _ in done], _TS)
        cols["window_end"] = pa.array([_ts(e) for _, e, _ in done], _TS)
        for name, fn, idx in plan.outputs:
            parts = [[acc[3 + i] for _, _, acc in done] for i in idx]
            if fn == "count":
                cols[name] = pa.array([v or 0 for v in parts[0]], pa.int64())
            elif fn == "avg":
                cols[name] = pa.array(
                    [None if not c else float(s) / c for s, c in zip(*parts, strict=True)],
                    pa.float64(),
                )
            else:
                cols[name] = pa.array(parts[0], schema.field(f"_twg_p{idx[0]}").type)
        return pa.RecordBatch.from_pydict(cols)

    def _late_batch(
        self, late: list[tuple[Any, ...]], wm: float, source: str
    ) -> pa.RecordBatch | None:
        if not late:
            return None
        group, partials = self._meta()
        schema = late_schema(partials, self._plan.group_by)
        n = len(late)
        first = self._late_seq.get(source, 0)
        self._late_seq[source] = first + n
        wm_ts = None if math.isinf(wm) else _ts(int(wm))
        arrays = [
            *(
                pa.array([v] * n, schema.field(c).type)
                for c, v in zip(self._plan.group_by, group, strict=True)
            ),  # fmt: skip
            pa.array([source] * n, pa.string()),
            pa.array(range(first, first + n), pa.int64()),
            pa.array([_ts(r[0]) for r in late], _TS),
            pa.array([_ts(r[1]) for r in late], _TS),
            pa.array([r[2] for r in late], pa.int64()),
            pa.array([wm_ts] * n, _TS),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
