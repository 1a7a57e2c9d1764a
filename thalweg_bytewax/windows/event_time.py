"""Event time, clamped: the time a batch counts as, and each record's, for windows and dedup.

Event time comes from whoever produced the record, so it is clamped before it moves a
window's clock: a record counts at most its ingest time (``<prefix>ingest_ts``, else
the processing time) plus an allowed skew (:data:`DEFAULT_ALLOWED_SKEW`). A batch counts
its newest clamped time; without a usable timestamp column it counts processing time.
:class:`EventClock` does this per batch for one step, counting and logging the records
it clamps. Windows (:mod:`thalweg_bytewax.windows`) and dedup's key memory
(:mod:`thalweg_bytewax.dedup`) both run on it.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = [
    "DEFAULT_ALLOWED_SKEW",
    "EventClock",
    "batch_time",
    "check_allowed_skew",
    "clamped_times",
]

logger = logging.getLogger(__name__)

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
