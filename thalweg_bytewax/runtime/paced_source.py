"""A source partition that paces itself: it holds the time Bytewax next wakes it.

Bytewax asks a source partition's ``next_awake`` before each ``next_batch`` and, for a
time in the future, does not call ``next_batch`` before then; the worker goes on with
its other work instead of blocking. The partitions that pace themselves (a rate limit,
a reader thread with nothing queued yet, a directory's next scan, a process whose sinks
are behind) keep that time in one attribute, and :class:`PacedPartition` answers
``next_awake`` from it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TypeVar

from bytewax.inputs import StatefulSourcePartition
from typing_extensions import override

__all__ = ["PacedPartition"]

X = TypeVar("X")
S = TypeVar("S")


class PacedPartition(StatefulSourcePartition[X, S]):
    """A ``StatefulSourcePartition`` that is next woken at the time it last set.

    Subclasses set ``_next_awake`` (an aware time; None, the default: call
    ``next_batch`` again at once), or call :meth:`_wake_in` with a delay from now.
    """

    _next_awake: datetime | None = None

    @override
    def next_awake(self) -> datetime | None:
        return self._next_awake

    def _wake_in(self, delay: timedelta | None) -> None:
        """Be woken ``delay`` from now (None: at once)."""
        self._next_awake = None if delay is None else datetime.now(UTC) + delay
