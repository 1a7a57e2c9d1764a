"""The time bound of SQL sessions: one thread interrupting cursors past their deadline.

Private to :mod:`thalweg_bytewax.sql.bounds`, which arms it around every session query.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from typing import Any

__all__ = ["Watchdog"]

_LINGER_SECONDS = 0.5
_SWEEP_SECONDS = 0.25


class Watchdog:
    """A thread that interrupts cursors whose deadline has passed.

    The thread runs while queries are armed and ends ~0.5 s after the last one is
    disarmed, so importing a flow that loads a contract leaves no thread behind, while a
    flow's next batch finds it running: arming and disarming only take a lock and touch
    a heap (a thread started and woken per query cost ~0.25 ms a batch). The thread is
    woken early only for a deadline earlier than the one it sleeps towards; it drops
    disarmed deadlines as it sweeps, every 0.25 s.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, list[Any]] = {}  # token -> [cursor, fired]
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake_at = float("inf")
        self._idle_since = 0.0
        self._pid = -1

    def arm(self, cursor: Any, seconds: float) -> int:
        """Interrupt ``cursor`` once ``seconds`` pass, unless disarmed first; a token."""
        with self._cond:
            if self._pid != os.getpid():  # a fork left the thread (and its deadlines) behind
                self._pid = os.getpid()
                self._heap.clear()
                self._armed.clear()
                self._thread = None
            token = next(self._tokens)
            deadline = time.monotonic() + seconds
            self._armed[token] = [cursor, False]
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None:
                self._wake_at = float("inf")
                self._thread = threading.Thread(
                    target=self._run, name="thalweg-sql-watchdog", daemon=True
                )
                self._thread.start()
            elif deadline < self._wake_at:
                self._cond.notify()
            return token

    def disarm(self, token: int) -> bool:
        """Forget ``token``; whether its deadline passed (the cursor was interrupted)."""
        with self._cond:
            entry = self._armed.pop(token, None)
            if not self._armed:
                self._idle_since = time.monotonic()
            return bool(entry and entry[1])

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, token = heapq.heappop(self._heap)
                    entry = self._armed.get(token)
                    if entry is not None and not entry[1]:
                        entry[1] = True
                        entry[0].interrupt()
                if len(self._heap) > len(self._armed):  # drop the disarmed deadlines
                    self._heap = [e for e in self._heap if e[1] in self._armed]
                    heapq.heapify(self._heap)
                if not self._armed and now - self._idle_since >= _LINGER_SECONDS:
                    self._thread = None  # under the lock: the next arm() starts a new one
                    return
                self._wake_at = now + _SWEEP_SECONDS
                if self._heap:  # all later than now, after the loop above
                    self._wake_at = min(self._heap[0][0], self._wake_at)
                self._cond.wait(self._wake_at - now)
