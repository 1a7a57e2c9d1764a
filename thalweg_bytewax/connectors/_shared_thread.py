"""A background thread that the partitions of one source in one process share.

The Kafka source's partition watch and the Arrow IPC source's file watch each run
one thread per source and process, whatever the number of partitions reading: the
first partition to hold the watch starts the thread, the last to let it go stops it.
"""

from __future__ import annotations

import threading

__all__ = ["SharedThread"]


class SharedThread:
    """Run :meth:`_run` on a daemon thread while at least one holder holds it.

    A subclass implements :meth:`_run`, which returns once its ``stop`` event is set.

    Args:
        thread_name: The thread's name (``thalweg-<what>-watch``), as thread dumps show it.
    """

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._users = 0
        self._stop: threading.Event | None = None

    def acquire(self) -> None:
        """Start the thread if this is the first partition holding the watch."""
        with self._lock:
            self._users += 1
            if self._stop is None:
                self._stop = threading.Event()
                threading.Thread(
                    target=self._run, args=(self._stop,), name=self._thread_name, daemon=True
                ).start()

    def release(self) -> None:
        """Stop the thread once no partition holds the watch."""
        with self._lock:
            self._users -= 1
            if self._users <= 0 and self._stop is not None:
                self._stop.set()
                self._stop = None
                self._users = 0

    def _run(self, stop: threading.Event) -> None:
        """The thread's work: repeat until ``stop`` is set."""
        raise NotImplementedError
