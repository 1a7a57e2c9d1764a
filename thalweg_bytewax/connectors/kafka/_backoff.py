"""Private: how long a Kafka source partition waits before its next poll.

A partition never blocks the worker: after an empty poll or a transient error it asks
to be woken later (``next_awake``), doubling the wait each time up to a cap, and goes
back to the first wait once records arrive.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["ERROR_BACKOFF", "IDLE_BACKOFF", "Backoff"]

IDLE_BACKOFF = (timedelta(milliseconds=1), timedelta(milliseconds=50))
"""The first and the longest wait after a poll that found no records."""
ERROR_BACKOFF = (timedelta(milliseconds=50), timedelta(seconds=5))
"""The first and the longest wait after a poll that met a transient error."""


class Backoff:
    """A wait that doubles at each :meth:`next` up to a cap.

    Args:
        bounds: The first wait and the longest.
    """

    def __init__(self, bounds: tuple[timedelta, timedelta]) -> None:
        self._first, self._cap = bounds
        self._current = self._first

    def next(self) -> timedelta:
        """The wait to take now; the next one is twice as long (up to the cap)."""
        delay = self._current
        self._current = min(self._current * 2, self._cap)
        return delay

    def reset(self) -> None:
        """Start again from the first wait."""
        self._current = self._first
