"""A circuit breaker: open after N consecutive failures, one half-open probe after a cool-down.

A flow that calls a failing service on every batch waits out a timeout per batch and
buries the service under retries. The breaker counts consecutive failures; at
``failures_to_open`` it opens and callers are refused at once (their rows go to the DLQ)
until ``cool_down`` has passed; then one call is let through as a probe (half-open): its
success closes the breaker, its failure opens it for another cool-down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum

__all__ = ["BreakerState", "CircuitBreaker"]


class BreakerState(StrEnum):
    """Where a :class:`CircuitBreaker` is."""

    CLOSED = "closed"
    """Calls go through; consecutive failures are counted."""
    OPEN = "open"
    """Calls are refused until the cool-down has passed."""
    HALF_OPEN = "half_open"
    """One probe call is out; the others are refused until it ends."""


class CircuitBreaker:
    """Opens after ``failures_to_open`` consecutive failures; probes after ``cool_down``.

    Thread-safe. Counters (:attr:`opened`, :attr:`refused`) are plain ints for the
    observability layer to export.

    Example:
        >>> now = [0.0]
        >>> b = CircuitBreaker(2, timedelta(seconds=5), clock=lambda: now[0])
        >>> b.failure(); b.failure(); b.state
        <BreakerState.OPEN: 'open'>
        >>> b.allow()
        False
        >>> now[0] = 6.0
        >>> b.allow(), b.state
        (True, <BreakerState.HALF_OPEN: 'half_open'>)
        >>> b.success(); b.state
        <BreakerState.CLOSED: 'closed'>

    Args:
        failures_to_open: Consecutive failures that open the breaker (at least 1).
        cool_down: How long it stays open before a probe is let through.
        clock: Seconds from a monotonic clock (tests pass their own).
    """

    def __init__(
        self,
        failures_to_open: int,
        cool_down: timedelta,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures_to_open < 1:
            msg = f"circuit breaker: expected failures_to_open >= 1; got {failures_to_open!r}"
            raise ValueError(msg)
        self.failures_to_open = failures_to_open
        self.cool_down_s = cool_down.total_seconds()
        self._clock = clock
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self.opened = 0
        """How many times the breaker opened."""
        self.refused = 0
        """Calls refused while open or half-open."""

    @property
    def state(self) -> BreakerState:
        """The current state (an open breaker past its cool-down still reads open)."""
        return self._state

    def allow(self) -> bool:
        """Whether a call may go out now; past the cool-down, the first caller probes."""
        with self._lock:
            if self._state is BreakerState.CLOSED:
                return True
            if (
                self._state is BreakerState.OPEN
                and self._clock() - self._opened_at >= self.cool_down_s
            ):
                self._state = BreakerState.HALF_OPEN
                return True
            self.refused += 1
            return False

    def success(self) -> None:
        """A call succeeded: close the breaker and forget the failures."""
        with self._lock:
            self._state = BreakerState.CLOSED
            self._failures = 0

    def failure(self) -> None:
        """A call failed: count it, and open the breaker at the threshold or after a probe."""
        with self._lock:
            self._failures += 1
            if self._state is BreakerState.HALF_OPEN or self._failures >= self.failures_to_open:
                if self._state is not BreakerState.OPEN:
                    self.opened += 1
                self._state = BreakerState.OPEN
                self._opened_at = self._clock()
