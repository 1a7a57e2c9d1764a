"""Counts of Arrow batches pickled in this process: what crossed to another process.

Bytewax 0.21.1 moves an item between the workers of one process as it is, and pickles
it only to send it to another process. Every batch a thalweg flow moves is a
``pyarrow.RecordBatch``, so a reducer registered for that type with :mod:`copyreg` (it
counts, then reduces the batch as pyarrow does) counts every batch, and its rows, that
left this process: ``records_pickled`` is ≈ 0 when every stateful step and sink shard
runs on the worker that read its partition (:mod:`~thalweg_bytewax.runtime.placement`).
Anything else that pickles a batch in the process (a ``multiprocessing`` pool, a test)
is counted too. The counts are served in ``/stats`` (``crossings``) and as
``thalweg_records_pickled_total`` / ``thalweg_batches_pickled_total``.
"""

from __future__ import annotations

import copyreg
import threading
from typing import Any

import pyarrow as pa

__all__ = ["Crossings", "crossings"]


class Crossings:
    """Batches and rows pickled in this process since it started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches = 0
        """Record batches pickled."""
        self.records = 0
        """Their rows."""

    def add(self, rows: int) -> None:
        """Count one pickled batch of ``rows`` rows."""
        with self._lock:
            self.batches += 1
            self.records += rows

    def as_dict(self) -> dict[str, int]:
        """``{"batches_pickled": …, "records_pickled": …}``."""
        with self._lock:
            return {"batches_pickled": self.batches, "records_pickled": self.records}


_CROSSINGS = Crossings()


def crossings() -> Crossings:
    """This process's counts."""
    return _CROSSINGS


def _reduce_batch(batch: pa.RecordBatch) -> Any:
    _CROSSINGS.add(batch.num_rows)
    return batch.__reduce__()


copyreg.pickle(pa.RecordBatch, _reduce_batch)
