"""``window_agg``: event-time tumbling, sliding and session windows over keyed Arrow batches.

Each batch is pre-aggregated columnar into mergeable partials per (group key, pane)
(:mod:`thalweg_bytewax.windows.aggregate`); the partials are re-keyed by group key and folded
in Bytewax keyed state (:class:`~thalweg_bytewax.windows.fold.WindowFolder`), so open
windows and watermarks survive recovery and Python touches one object per (group key,
pane) of a batch, never one per record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.compute as pc
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream, StatefulLogic
from typing_extensions import override

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_PREFIX, metadata_columns
from thalweg_bytewax.windows import (
    DEFAULT_ALLOWED_SKEW,
    SOURCE,
    EventClock,
    Session,
    Sliding,
    Tumbling,
    WindowFolder,
    WindowPlan,
    WindowSpec,
    check_allowed_skew,
    pre_aggregate,
    split_by_key,
)

__all__ = ["Session", "Sliding", "Tumbling", "WindowAggOut", "WindowAggStats", "window_agg"]

logger = logging.getLogger(__name__)

_Tagged = tuple[str, pa.RecordBatch]
_WINDOW, _LATE = "window", "late"


@dataclass
class WindowAggStats:
    """Plain counters of one ``window_agg`` step in this process.

    Attributes:
        windows: Window results emitted.
        late_records: Records that arrived after a window they belong to had closed
            (or without an event time).
        clamped: Records whose event time was clamped to ingest time + allowed skew.
    """

    windows: int = 0
    late_records: int = 0
    clamped: int = 0


@dataclass(frozen=True)
class WindowAggOut:
    """The streams of :func:`window_agg`.

    Attributes:
        windows: Closed windows, keyed by group key: group columns, ``window_start``,
            ``window_end`` (timestamp µs UTC) and one column per aggregate. Unique by
            (group columns, ``window_start``): upsert on that key.
        late: Late partials, keyed by group key: group columns, ``source`` (the source
            partition of the late records), ``late_seq`` (the row's number among its
            group key's late rows from that source partition), ``event_time_min``,
            ``event_time_max``, ``late_records`` and the ``watermark`` they missed.
            Unique by (group columns, ``source``, ``late_seq``), the same after a
            resume: upsert on that key.
        stats: This process's counters of the step.
    """

    windows: KeyedStream[pa.RecordBatch]
    late: KeyedStream[pa.RecordBatch]
    stats: WindowAggStats = field(compare=False)


class _FoldLogic(StatefulLogic[pa.RecordBatch, _Tagged, tuple[Any, ...]]):
    def __init__(
        self,
        plan: WindowPlan,
        resume: tuple[Any, ...] | None,
        stats: WindowAggStats,
        where: str,
    ) -> None:
        self._folder = WindowFolder(plan, resume)
        self._stats = stats
        self._where = where

    def _tag(
        self, closed: pa.RecordBatch | None, late: pa.RecordBatch | None = None
    ) -> list[_Tagged]:
        out: list[_Tagged] = []
        if closed is not None:
            self._stats.windows += closed.num_rows
            out.append((_WINDOW, closed))
        if late is not None:
            n = int(pc.sum(late.column("late_records")).as_py() or 0)
            if not self._stats.late_records:
                logger.warning(
                    "%s: %d record(s) arrived after their window closed; they go to the "
                    "`late` stream (raise `allowed_lateness` to keep windows open longer)",
                    self._where,
                    n,
                )
            self._stats.late_records += n
            out.append((_LATE, late))
        return out

    @override
    def on_item(self, value: pa.RecordBatch) -> tuple[Iterable[_Tagged], bool]:
        return (self._tag(*self._folder.fold(value)), StatefulLogic.RETAIN)

    @override
    def on_eof(self) -> tuple[Iterable[_Tagged], bool]:
        # Keep the watermark: a window re-opened by later data would overwrite its result.
        return (self._tag(self._folder.flush()), StatefulLogic.RETAIN)

    @override
    def snapshot(self) -> tuple[Any, ...]:
        return self._folder.snapshot()


def _event_times(
    where: str, clock: EventClock, batch: pa.RecordBatch, time_column: str
) -> pa.Array:
    if time_column not in batch.schema.names:
        msg = (
            f"{where}: expected the event-time column `{time_column}` in the batch; "
            f"got {batch.schema.names!r}. Set `time_column`"
        )
        raise ConfigError(msg)
    col = batch.column(time_column)
    if not pa.types.is_timestamp(col.type):
        msg = (
            f"{where}: expected `{time_column}` to be a timestamp; got {col.type}. "
            "Cast it upstream (e.g. in SQL)"
        )
        raise ConfigError(msg)
    _, seconds = clock(batch)
    if seconds is None:  # every event time is null
        return pa.nulls(batch.num_rows, pa.int64())
    return pc.round(pc.multiply(seconds, 1_000_000.0)).cast(pa.int64())


@operator
def window_agg(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    *,
    window: WindowSpec,
    aggs: Mapping[str, tuple[str, str]],
    time_column: str,
    group_by: Sequence[str] = (),
    allowed_lateness: timedelta = timedelta(0),
    allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> WindowAggOut:
    """Aggregate records into event-time windows per group key; late records are reported.

    Each batch is pre-aggregated columnar into mergeable partials per (group key, pane);
    partials are re-keyed by group key and folded in Bytewax keyed state, so open
    windows and watermarks survive recovery. The watermark is per group key: the
    newest clamped event time seen for the key minus ``allowed_lateness``. A window is
    emitted once, when the watermark passes its end (a session: its last event plus
    ``gap``); at the end of a bounded stream every open window is emitted.

    A partial that arrives after a window it belongs to closed is late: it goes to the
    ``late`` stream with its record count, and ``stats.late_records`` counts it.
    Records without an event time are late too. Late rows are numbered per group key
    and source partition in the state (``source``, ``late_seq``), so one re-emitted
    after a resume has the key it had: upsert the late report on (group columns,
    ``source``, ``late_seq``) and each late record lands once. Event time is the
    producer's, so it is clamped to ingest time (``<prefix>ingest_ts``, else now) plus
    ``allowed_skew`` before it drives a window or the watermark.

    After a resume, Bytewax emits again the windows that closed after the last
    snapshot, with the same values when the input replays in the same order: results
    are unique by (group columns, ``window_start``), so a sink that upserts on that key
    absorbs them. They carry no source locator, so no sink can skip them by offset:
    write them to ``PostgresSink`` or ``IcebergSink`` with ``locators="absent"`` and
    ``mode="upsert"`` on (group columns, ``window_start``) (docs/windows.md).

    ```python
    import thalweg_bytewax.operators as twg

    out = twg.window_agg(
        "revenue_per_minute", orders,
        window=twg.Tumbling(timedelta(minutes=1)),
        aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
        group_by=["status"],
        time_column="created_at",
        allowed_lateness=timedelta(seconds=30),
    )
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches (key = source partition).
        window: :class:`Tumbling`, :class:`Sliding` or :class:`Session`; windows are
            aligned to the Unix epoch.
        aggs: Output column -> ``(function, column)``: ``count`` (``"*"`` for every
            row), ``sum``, ``min``, ``max``, ``avg``. Count distinct is refused.
        time_column: The event-time (timestamp) column.
        group_by: Group key columns (none: one group).
        allowed_lateness: How far behind its key's newest event time a record may be
            and still join its window.
        allowed_skew: How far ahead of ingest time an event time may be before it is
            clamped.
        metadata_prefix: Prefix of the metadata columns (for ``ingest_ts``).

    Returns:
        The ``windows`` and ``late`` streams and the step's counters.

    Raises:
        ConfigError: At build time for a bad window, aggregate or duration; at run time
            when a batch lacks a column the aggregation reads.
    """
    plan = WindowPlan(window, aggs, group_by, allowed_lateness)
    where = f"window_agg `{step_id}`"
    columns = metadata_columns(metadata_prefix, where)
    clock = EventClock(
        where,
        time_column,
        allowed_skew=check_allowed_skew(allowed_skew, where),
        ingest_column=columns.ingest_ts,
    )
    stats = WindowAggStats()

    def partials(item: tuple[str, pa.RecordBatch]) -> list[tuple[str, pa.RecordBatch]]:
        source, batch = item
        if batch.num_rows == 0:
            return []
        times = _event_times(where, clock, batch, time_column)
        stats.clamped = clock.clamped
        table = pre_aggregate(batch, times, plan)
        # One value per partial (group key and pane), never per record: names the source
        # partition on the late rows, whose numbering is per source partition.
        table = table.append_column(SOURCE, pa.array([source] * table.num_rows, pa.string()))
        return split_by_key(table, plan.group_by)

    keyed = op.flat_map("partials", up, partials)

    def build(resume: tuple[Any, ...] | None) -> _FoldLogic:
        return _FoldLogic(plan, resume, stats, where)

    folded = op.stateful("fold", keyed, build)
    split = op.branch("split", folded, lambda kv: kv[1][0] == _WINDOW)
    windows = op.map_value("windows", split.trues, lambda tagged: tagged[1])
    late = op.map_value("late", split.falses, lambda tagged: tagged[1])
    return WindowAggOut(windows, late, stats)
