"""Dedup's key memory: a time-bounded set of seen keys.

:class:`SeenWindow` is the state of ``dedup`` and of windowed ``unique`` rules; it is
plain, picklable core state, so any operator (or a test) can hold one.

Keys are kept in time buckets (a sixteenth of the window each); a key is remembered
from the bucket it was first seen in until that bucket leaves the window, so memory is
bounded by the keys of one window (plus the allowed skew and one bucket). Time is event
time where the batch carries a usable timestamp column (replays then see the same times
as the first pass), else processing time, clamped as
:mod:`thalweg_bytewax.windows.event_time` says: the clock is the newest clamped time
seen; an older time (0, negative, years late) never moves it back, and its key is
remembered as if seen at the clock.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from datetime import timedelta
from itertools import compress, repeat
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.windows.event_time import DEFAULT_ALLOWED_SKEW, check_allowed_skew

__all__ = ["SeenWindow", "key_values"]

# 16 buckets: eviction granularity of 1/16 of the window (memory overshoot <= 6.25%).
_BUCKETS = 16


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


def key_values(batch: pa.RecordBatch, columns: Sequence[str], rows: np.ndarray) -> list[Hashable]:
    """Hashable keys of ``rows``: the value for one column, a tuple for several."""
    idx = pa.array(rows, pa.int64())
    cols: list[list[Hashable]] = [batch.column(c).take(idx).to_pylist() for c in columns]
    if len(cols) == 1:
        return cols[0]
    return list(zip(*cols, strict=True))
