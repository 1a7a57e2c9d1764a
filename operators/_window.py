"""Private: a time-bounded set of seen keys, the state of dedup and windowed uniqueness.

Keys are kept in time buckets (a sixteenth of the window each); a key is remembered
from the bucket it was first seen in until that bucket leaves the window, so memory is
bounded by the keys of one window (plus one bucket). Time is event time where the batch
carries a usable timestamp column (replays then see the same times as the first pass),
else processing time.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from datetime import timedelta
from itertools import compress, repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError

__all__ = ["SeenWindow", "batch_time", "key_values"]

# 16 buckets: eviction granularity of 1/16 of the window (memory overshoot <= 6.25%).
_BUCKETS = 16


class SeenWindow:
    """Keys seen within the last ``window``; picklable through :meth:`snapshot`."""

    def __init__(self, window: timedelta, state: tuple[Any, ...] | None = None) -> None:
        if window <= timedelta(0):
            msg = f"dedup window: expected a positive duration; got {window!r}"
            raise ConfigError(msg)
        self._width = window.total_seconds() / _BUCKETS
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

    def check_and_add(self, keys: Sequence[Hashable], now: float) -> np.ndarray:
        """Which ``keys`` were seen within the window; remember the new ones.

        ``keys`` must be distinct (the caller removes in-batch duplicates columnar).
        """
        self._watermark = max(self._watermark, now)
        current = int(self._watermark // self._width)
        # Keep _BUCKETS + 1 buckets: a key is remembered for at least the whole window.
        for number in [b for b in self._buckets if b < current - _BUCKETS]:
            for key in self._buckets.pop(number):
                self._seen.pop(key, None)
        seen = self._seen
        hits = np.fromiter(map(seen.__contains__, keys), dtype=bool, count=len(keys))
        new = list(compress(keys, ~hits))
        if new:
            seen.update(zip(new, repeat(current)))
            self._buckets.setdefault(current, []).extend(new)
        return hits

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable copy of the state for recovery."""
        return (self._watermark, tuple((n, tuple(k)) for n, k in self._buckets.items()))


def batch_time(batch: pa.RecordBatch, time_column: str | None) -> float:
    """Seconds since the epoch that a batch counts as: its newest event time, or now."""
    if time_column is not None and time_column in batch.schema.names:
        col = batch.column(time_column)
        if pa.types.is_timestamp(col.type) and col.null_count < len(col):
            newest = pc.max(col.cast(pa.timestamp("us", tz=col.type.tz))).value
            return float(newest) / 1_000_000
    return time.time()


def key_values(batch: pa.RecordBatch, columns: Sequence[str], rows: np.ndarray) -> list[Hashable]:
    """Hashable keys of ``rows``: the value for one column, a tuple for several."""
    idx = pa.array(rows, pa.int64())
    cols: list[list[Hashable]] = [batch.column(c).take(idx).to_pylist() for c in columns]
    if len(cols) == 1:
        return cols[0]
    return list(zip(*cols, strict=True))
