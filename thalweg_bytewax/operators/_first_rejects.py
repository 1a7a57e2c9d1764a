"""One warning per step for the first rows it sends to the DLQ, whichever thread sends them.

A step that rejects rows says so once in the log (the DLQ holds every row and why);
batches may be converted on several threads, so the first one is decided under a lock.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["FirstRejects"]


class FirstRejects:
    """Logs a step's first rejected rows, once.

    Args:
        logger: The operator's logger (the warning is its record).
        operator: The operator as the log names it, e.g. ``"decode"``.
        what: What was rejected, e.g. ``"undecodable record(s)"``.
    """

    __slots__ = ("_lock", "_logged", "_logger", "_template")

    def __init__(self, logger: logging.Logger, operator: str, what: str) -> None:
        self._logger = logger
        self._template = f"{operator} %s: first {what}, sent to the DLQ: %s"
        self._logged = False
        self._lock = threading.Lock()

    def log(self, step_id: str, message: str) -> None:
        """Warn with the first rejected row's ``message``; later calls log nothing."""
        with self._lock:
            first, self._logged = not self._logged, True
        if first:
            self._logger.warning(self._template, step_id, message)
