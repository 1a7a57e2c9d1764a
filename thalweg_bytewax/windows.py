"""Windowed key memory: a time-bounded set of seen keys, and clamped event time.

:class:`SeenWindow` is the state of ``dedup`` and of windowed ``unique`` rules; it is
plain, picklable core state, so any operator (or a test) can hold one.

Keys are kept in time buckets (a sixteenth of the window each); a key is remembered
from the bucket it was first seen in until that bucket leaves the window, so memory is
bounded by the keys of one window (plus the allowed skew and one bucket). Time is event
time where the batch carries a usable timestamp column (replays then see the same times
as the first pass), else processing time.

Event time comes from whoever produced the record, so it is clamped before it moves the
window's clock: a record counts at most its ingest time (``<prefix>ingest_ts``, else
the processing time) plus an allowed skew. The clock is the newest clamped time seen;
an older time (0, negative, years late) never moves it back, and its key is remembered
as if seen at the clock.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Hashable, Sequence
from datetime import timedelta
from itertools import compress, repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = [
    "DEFAULT_ALLOWED_SKEW",
    "EventClock",
    "SeenWindow",
    "batch_time",
    "check_allowed_skew",
    "clamped_times",
    "key_values",
]

logger = logging.getLogger(__name__)

# 16 buckets: eviction granularity of 1/16 of the window (memory overshoot <= 6.25%).
_BUCKETS = 16

DEFAULT_ALLOWED_SKEW = timedelta(minutes=1)
"""How far ahead of its ingest time a record's event time may be before it is clamped.

NTP-synced producers are within a second of the broker; a minute also admits a
producer's linger and a client clock that drifted, while capping what one future-dated
record can do to a window (it moves the clock at most this far ahead of ingest time,
and windows remember keys this much longer to make up for it)."""

_INGEST_TS = MetadataColumns().ingest_ts
_PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def check_allowed_skew(allowed_skew: timedelta, where: str) -> timedelta:
    """``allowed_skew`` if it is a non-negative duration, else a :class:`ConfigError`."""
    if not isinstance(allowed_skew, timedelta) or allowed_skew < timedelta(0):
        msg = (
            f"{where}: expected `allowed_skew` to be a non-negative timedelta; got "
            f"{allowed_skew!r}. Pass e.g. allowed_skew=timedelta(minutes=1)"
        )
        raise ConfigError(msg)
    return allowed_skew


class SeenWindow:
    """Keys seen within the last ``window``; picklable through :meth:`snapshot`.

    A key is remembered until the clock has moved ``window + allowed_skew`` (rounded up
    to whole buckets) past the bucket it was first seen in: the clock may run up to
    ``allowed_skew`` ahead of honest event time, and a duplicate within ``window`` of
    honest time must still be found.
    """

    def __init__(
        self,
        window: timedelta,
        state: tuple[Any, ...] | None = None,
        *,
        allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
    ) -> None:
        if window <= timedelta(0):
            msg = f"dedup window: expected a positive duration; got {window!r}"
            raise ConfigError(msg)
        check_allowed_skew(allowed_skew, "dedup window")
        self._width = window.total_seconds() / _BUCKETS
        self._skew = allowed_skew.total_seconds()
        self._keep = _BUCKETS + math.ceil(allowed_skew.total_seconds() / self._width)
        self._seen: dict[Hashable, int] = {}
        self._buckets: dict[int, list[Hashable]] = {}
        self._watermark = float("-inf")
        if state is not None:
            watermark, buckets = state
            self._watermark = watermark
            for number, keys in buckets:
                self._buckets[number] = list(keys)
                self._seen.update(zip(keys, repeat(number)))

    def __len__(self) -> int:
        return len(self._seen)

    def check_and_add(
        self, keys: Sequence[Hashable], now: float, times: np.ndarray | None = None
    ) -> np.ndarray:
        """Which ``keys`` were seen within the window; remember the new ones.

        ``keys`` must be distinct (the caller removes in-batch duplicates columnar).
        ``now`` moves the clock forward only. A new key is remembered from its own
        clamped event time in ``times`` (seconds, NaN where unknown) when given, held
        within ``[clock - allowed_skew, clock]``, else from the clock: an honest record
        is remembered from its own time even while a future-dated one has pushed the
        clock ahead, and a late one as if seen ``allowed_skew`` before the clock.
        """
        if now > self._watermark:  # also false for NaN
            self._watermark = now
        current = int(self._watermark // self._width)
        # Keep _keep + 1 buckets: a key is remembered for at least window + skew.
        for number in [b for b in self._buckets if b < current - self._keep]:
            for key in self._buckets.pop(number):
                self._seen.pop(key, None)
        seen = self._seen
        hits = np.fromiter(map(seen.__contains__, keys), dtype=bool, count=len(keys))
        if hits.all():
            return hits
        new = list(compress(keys, ~hits))
        if times is None:
            seen.update(zip(new, repeat(current)))
            self._buckets.setdefault(current, []).extend(new)
            return hits
        clock = self._watermark
        stamps = np.nan_to_num(np.asarray(times, dtype=np.float64)[~hits], nan=clock)
        numbers = (np.clip(stamps, clock - self._skew, clock) // self._width).astype(np.int64)
        for number in np.unique(numbers).tolist():
            group = list(compress(new, numbers == number))
            seen.update(zip(group, repeat(number)))
            self._buckets.setdefault(number, []).extend(group)
        return hits

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable copy of the state for recovery."""
        return (self._watermark, tuple((n, tuple(k)) for n, k in self._buckets.items()))


def _seconds(col: pa.Array) -> pa.Array:
    """A timestamp column as float64 seconds since the epoch (never overflows; nulls kept)."""
    ints = col.cast(pa.int64()).cast(pa.float64(), safe=False)
    return pc.divide(ints, _PER_SECOND[col.type.unit])


def clamped_times(
    batch: pa.RecordBatch,
    time_column: str | None,
    *,
    allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
    ingest_column: str | None = _INGEST_TS,
) -> tuple[float, pa.Array | None, int]:
    """The time a batch counts as, each record's clamped event time, and how many were clamped.

    Each record's event time counts ``min(event time, ingest time + allowed_skew)``
    (ingest time from ``ingest_column``, else now), in float seconds since the epoch;
    the batch counts its newest clamped time. Without a usable event-time column
    (absent, not a timestamp, all null) the batch counts processing time, there are no
    per-record times (``None``) and nothing is clamped. A null event time stays null.
    """
    now = time.time()
    if time_column is None or time_column not in batch.schema.names:
        return now, None, 0
    col = batch.column(time_column)
    if not pa.types.is_timestamp(col.type) or col.null_count == len(col):
        return now, None, 0
    event = _seconds(col)
    bound: pa.Array | pa.Scalar = pa.scalar(now, pa.float64())
    if ingest_column is not None and ingest_column in batch.schema.names:
        ingest = batch.column(ingest_column)
        if pa.types.is_timestamp(ingest.type):
            bound = pc.fill_null(_seconds(ingest), now)
    bound = pc.add(bound, allowed_skew.total_seconds())
    clamped = int(pc.sum(pc.greater(event, bound)).as_py() or 0)
    times = pc.min_element_wise(event, bound, skip_nulls=False)
    return float(pc.max(times).as_py()), times, clamped


def batch_time(
    batch: pa.RecordBatch,
    time_column: str | None,
    *,
    allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
    ingest_column: str | None = _INGEST_TS,
) -> float:
    """Seconds since the epoch that a batch counts as: its newest clamped event time, or now.

    See :func:`clamped_times`.
    """
    return clamped_times(
        batch, time_column, allowed_skew=allowed_skew, ingest_column=ingest_column
    )[0]


class EventClock:
    """The clamped time of each batch for one step; counts and logs clamping.

    Args:
        where: The step, as error and log text names it (e.g. ``dedup `orders```).
        time_column: The event-time column.
        allowed_skew: How far ahead of ingest time an event time may be.
        ingest_column: The ingest-time column.

    Attributes:
        clamped: Records whose event time was clamped since the step started.
    """

    def __init__(
        self,
        where: str,
        time_column: str | None,
        *,
        allowed_skew: timedelta = DEFAULT_ALLOWED_SKEW,
        ingest_column: str | None = _INGEST_TS,
    ) -> None:
        self._where = where
        self._time_column = time_column
        self._skew = check_allowed_skew(allowed_skew, where)
        self._ingest_column = ingest_column
        self.clamped = 0
        self._clamping = False

    def __call__(self, batch: pa.RecordBatch) -> tuple[float, pa.Array | None]:
        """The time ``batch`` counts as and its records' clamped times (:func:`clamped_times`)."""
        now, times, clamped = clamped_times(
            batch, self._time_column, allowed_skew=self._skew, ingest_column=self._ingest_column
        )
        self.clamped += clamped
        if clamped and not self._clamping:
            self._clamping = True
            logger.warning(
                "%s: %d event time(s) in `%s` more than %s ahead of ingest time; clamped "
                "to ingest time + allowed skew (%d clamped so far)",
                self._where,
                clamped,
                self._time_column,
                self._skew,
                self.clamped,
            )
        elif not clamped and self._clamping:
            self._clamping = False
            logger.info(
                "%s: event times back within %s of ingest time (%d clamped so far)",
                self._where,
                self._skew,
                self.clamped,
            )
        return now, times


def key_values(batch: pa.RecordBatch, columns: Sequence[str], rows: np.ndarray) -> list[Hashable]:
    """Hashable keys of ``rows``: the value for one column, a tuple for several."""
    idx = pa.array(rows, pa.int64())
    cols: list[list[Hashable]] = [batch.column(c).take(idx).to_pylist() for c in columns]
    if len(cols) == 1:
        return cols[0]
    return list(zip(*cols, strict=True))
