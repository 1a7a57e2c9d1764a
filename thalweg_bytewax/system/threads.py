"""Thread pools of the process, each started on first use and shared by every caller.

Decoding, record ids, the file source's read-ahead and JSON lines, and the Parquet
sink's writers each keep one pool per process: a module names it once
(``_pool = SharedPool(4, "twg-decode")``) and calls it where it needs the executor
(``_pool().map(...)``); no thread starts before the first call.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["SharedPool"]


class SharedPool:
    """A process-wide :class:`ThreadPoolExecutor`, created by the first call.

    Args:
        workers: Its threads at most.
        name: The prefix of its threads' names (``twg-decode``), as thread dumps show.
    """

    def __init__(self, workers: int, name: str) -> None:
        self.workers = workers
        self.name = name
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def __call__(self) -> ThreadPoolExecutor:
        """The pool, started on the first call (thread-safe)."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=self.name)
            return self._executor
