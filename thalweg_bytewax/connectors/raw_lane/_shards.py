"""Private: what the Parquet and Arrow IPC lane sinks share.

Per sink and process: the lane's store, checked writable once, claimed once per step,
and each shard's staging files of an unfinished earlier run removed before it writes
(:class:`LaneShards`). Per partition: the counters (:class:`LaneSinkStats`), the staged
files of an epoch (:class:`StagedFile`), each source partition's directory and files
(:class:`LaneStream`) and the translation of ``OSError`` into sink errors
(:func:`lane_io`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.errors import sink_io_error
from thalweg_bytewax.runtime.epoch_sink import EpochSinkStats

from ._store import LaneStore, open_store, staging_prefix

__all__ = ["LaneShards", "LaneSinkStats", "LaneStream", "StagedFile", "lane_io"]

WriterT = TypeVar("WriterT")


class LaneSinkStats(EpochSinkStats):
    """Plain counters of one lane sink partition, exported by the observability layer.

    Attributes:
        files_finalized: Files made durable and visible under their final names.
    """

    __slots__ = ("files_finalized",)

    def __init__(self) -> None:
        super().__init__()
        self.files_finalized = 0


@dataclass
class StagedFile:
    """A staging file of the current epoch and the offsets it holds."""

    path: str
    first: int
    last: int

    def widen(self, first: int, last: int) -> None:
        """Hold ``first..last`` too: rows of those offsets were written to the file."""
        self.first = min(self.first, first)
        self.last = max(self.last, last)


@dataclass
class LaneStream(Generic[WriterT]):
    """One source partition's directory, its files, and the files written this epoch."""

    directory: str
    # The finalized files listed when this run met the partition: what a replay is
    # checked against by record id (files this run finalizes are not added, so the
    # partition's memory stays flat over a long run).
    files: list[tuple[int, int, str]]
    writer: WriterT | None = None
    sink_file: pa.NativeFile | None = None
    current: StagedFile | None = None
    """The staging file open now."""
    closed: list[StagedFile] = field(default_factory=list)
    """The staging files of this epoch closed so far."""


@contextlib.contextmanager
def lane_io(component: str, root: str, action: str) -> Iterator[None]:
    """No raw ``OSError`` leaves the lane: it becomes a transient or terminal sink error."""
    try:
        yield
    except OSError as exc:
        where = f" at `{exc.filename}`" if exc.filename else ""
        msg = f"{component} `{root}`: {action} failed{where}"
        raise sink_io_error(msg, exc) from exc


class LaneShards:
    """The per-process setup of a lane sink's shards, shared by its workers.

    Args:
        path: The lane's directory, URI or path on ``filesystem``.
        filesystem: A ``pyarrow.fs.FileSystem``, or None.
        component: The sink's name in messages, e.g. ``"parquet sink"``.
        log: The sink's logger (what is removed is logged there).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        filesystem: pafs.FileSystem | None,
        component: str,
        log: logging.Logger,
    ) -> None:
        self._log = log
        self._path = path
        self._filesystem = filesystem
        self._component = component
        self._checked = False
        self._claimed: set[str] = set()
        self._stale_staging: list[str] | None = None
        self._lock = threading.Lock()

    def store(self) -> LaneStore:
        """The lane's store; the first call proves the lane writable (a bad path fails)."""
        store = open_store(self._path, self._filesystem, self._component)
        if not self._checked:
            store.check_writable()
            self._checked = True
        return store

    def prepare(self, step_id: str, shard: int) -> LaneStore:
        """The store for ``shard``, claimed by ``step_id``, without the shard's stale staging.

        A staging file of an epoch that never reached its snapshot is never published
        (its rows are replayed), but it would stay forever in a partition that is never
        written again. The lane is listed once per process, before any shard of it
        writes; each shard deletes only its own files, since the shards of other
        processes may be writing theirs.
        """
        with self._lock:  # workers of one process build their shards concurrently
            store = self.store()
            if step_id not in self._claimed:
                store.claim(step_id)
                self._claimed.add(step_id)
            if self._stale_staging is None:
                self._stale_staging = store.staging_files()
            prefix = staging_prefix(shard)
            mine = [p for p in self._stale_staging if p.rpartition("/")[2].startswith(prefix)]
        for stale in mine:
            store.delete(stale)
        if mine:
            self._log.info(
                "%s: removed %s staging files of an unfinished epoch of shard %s",
                self._component,
                len(mine),
                shard,
            )
        return store
