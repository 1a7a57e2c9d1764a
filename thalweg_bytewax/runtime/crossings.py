"""Counts of Arrow batches that left the worker reading their source partition.

Bytewax 0.21.1 moves an item between the workers of one process as it is, and pickles
it only to send it to another process. Every batch a thalweg flow moves is a
``pyarrow.RecordBatch``, so a reducer registered for that type with :mod:`copyreg` (it
counts, then reduces the batch as pyarrow does) counts every batch, and its rows, that
left this process: ``records_pickled`` (rows with a source locator: records read from
a source partition; rows without one, window partials and results, are
``other_rows_pickled``) is ≈ 0 when every stateful step and sink shard
runs on the worker that read its partition (:mod:`~thalweg_bytewax.runtime.placement`).
Anything else that pickles a batch in the process (a ``multiprocessing`` pool, a test)
is counted too.

Between the workers of one process nothing is pickled, so a hand-over is counted where
it lands: every thalweg source notes the worker thread that builds (and so reads) a
partition (:func:`note_readers`), and ``twg.dedup``, ``twg.validate`` and every
epoch sink count a batch of that partition arriving on another thread
(:func:`arrived`): ``records_handed_over``. A partition read in another process is not
noted here; its batches were counted when pickled there. The counts are served in
``/stats`` (``crossings``) and as ``thalweg_crossing_records_total{kind}``.
"""

from __future__ import annotations

import copyreg
import threading
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

__all__ = ["Crossings", "arrived", "crossings", "note_readers"]


class Crossings:
    """Batches and rows pickled in this process since it started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches = 0
        """Record batches pickled."""
        self.records = 0
        """Their rows that carry a source locator (records read from a source partition)."""
        self.other_rows = 0
        """Their rows without one (window partials and results, re-keyed aggregates)."""
        self.handed_batches = 0
        """Batches that reached a step or sink on another worker of this process."""
        self.handed_records = 0
        """Their rows."""

    def add(self, rows: int, *, located: bool = True) -> None:
        """Count one pickled batch of ``rows`` rows, with source locators or without."""
        with self._lock:
            self.batches += 1
            if located:
                self.records += rows
            else:
                self.other_rows += rows

    def hand_over(self, rows: int) -> None:
        """Count one batch of ``rows`` rows handed to another worker of this process."""
        with self._lock:
            self.handed_batches += 1
            self.handed_records += rows

    def as_dict(self) -> dict[str, int]:
        """The counts: ``batches_pickled``, ``records_pickled``, ``batches_handed_over``, …."""
        with self._lock:
            return {
                "batches_pickled": self.batches,
                "records_pickled": self.records,
                "other_rows_pickled": self.other_rows,
                "batches_handed_over": self.handed_batches,
                "records_handed_over": self.handed_records,
            }


_CROSSINGS = Crossings()


def crossings() -> Crossings:
    """This process's counts."""
    return _CROSSINGS


_LOCATOR = "source_offset"
"""The locator column's name ends so (``_twg_source_offset`` under any prefix)."""

_readers: dict[str, int] = {}
"""Partition key -> the native id of the worker thread that reads it (this process)."""


def note_readers(keys: Iterable[str]) -> None:
    """The calling worker thread reads ``keys`` (and no other worker does)."""
    reader = threading.get_native_id()
    for key in keys:
        _readers[key] = reader


def arrived(key: str, rows: int) -> None:
    """A batch of partition ``key`` reached a step here: count it if another worker read it."""
    reader = _readers.get(key)
    if reader is not None and reader != threading.get_native_id():
        _CROSSINGS.hand_over(rows)


def _located(schema: pa.Schema) -> bool:
    return any(name.endswith(_LOCATOR) for name in schema.names)


def _reduce_batch(batch: pa.RecordBatch) -> Any:
    _CROSSINGS.add(batch.num_rows, located=_located(batch.schema))
    return batch.__reduce__()


copyreg.pickle(pa.RecordBatch, _reduce_batch)
