"""Arrow IPC in: read a directory an ``ArrowIPCSink`` wrote, in offset order, without decoding.

:class:`ArrowIPCSource` reads such a directory back, one partition per directory
(one source partition: its files in offset order), so another flow or process
consumes the batches in the order they were written: local files are memory-mapped,
and a batch is a view of the file's pages, with nothing decoded. Rows keep the
locator columns the sink wrote and are keyed by their source partition
(``"orders:3"``), so an epoch sink downstream owns, orders and skips replays as it
would behind the original source.

Why not ``FileSource``, which also reads IPC files? ``FileSource`` treats a file as a
new origin: its rows get the path as topic and the row index as offset (and a new
record id), and its state is a row index. ``ArrowIPCSource`` is the lane-aware reader:
it keeps the rows' own locator and record id, its state is the file being read and its
next batch index (a resume seeks straight to it in the file format), and it can follow
a directory.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

import pyarrow as pa
import pyarrow.fs as pafs
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.config import seconds_keywords
from thalweg_bytewax.connectors._filesystem import check_filesystem
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

from ._listing import FileWatch, IPCFiles, by_directory, split_glob
from ._source_partition import IPCDirectoryPartition
from .config import ArrowIPCSourceConfig

__all__ = ["ArrowIPCSource"]

logger = logging.getLogger(__name__)


class ArrowIPCSource(FixedPartitionedSource[KeyedBatch, tuple[str, int]]):
    """Read a directory of Arrow IPC files (an ``ArrowIPCSink``'s) as keyed batches.

    Directories are the unit of parallelism: one partition per directory holding
    files, keyed ``"<directory>:0"`` — under an ``ArrowIPCSink`` that is one source
    partition (``<path>/<topic>/<partition>/``), whose files a partition reads one after
    the other in offset order (files named ``<first>-<last>.arrow`` by their offsets,
    any other file after them by name). A source partition that spans many files (a run
    of many epochs) therefore reaches the next sink in offset order, as it was written.
    The state is the file being read and the index of its next record batch, so a
    resumed run starts at the batch after its last completed epoch. Exactly-once with an
    epoch sink downstream: batches keep the rows' locator columns and are keyed by
    their source partition (``"orders:3"``), so the sink skips what it already holds.
    Rows without locator columns are keyed by their directory. Local files are
    memory-mapped (nothing is copied or decoded unless the files are compressed).

    State kept by versions that read one partition per file does not resume here:
    Bytewax refuses it before the flow starts, and ``thalweg recovery check`` names
    the step and the remedy (a fresh recovery directory; an epoch sink downstream skips
    the rows it already holds).

    Example::

        flow = Dataflow("from_ipc")
        batches = op.input("in", flow, ArrowIPCSource("lake/ipc"))
        op.output("lane", batches, ParquetSink("lake/raw"))

    The keywords other than ``filesystem`` build an
    :class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSourceConfig` (:attr:`config`).

    Args:
        path: A directory (its ``.arrow`` and ``.arrows`` files, recursively), a glob
            (``lake/ipc/orders/*/*.arrow``; ``**`` spans directories) or one file;
            local, a URI, or a path on ``filesystem``. Names starting with ``.`` or
            ``_`` (staging files) are skipped. Listed once, when the flow starts.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``path``.
        follow: Keep the flow running after the files are read and re-list the
            directory every ``follow_interval``: files finalized since the start are
            logged once and are read when the flow restarts (Bytewax lists partitions
            once). False ends each partition at the end of its directory's last file.
        follow_interval: Time between listings when following (default 5 seconds).
        metadata_prefix: Prefix of the metadata columns.
        follow_interval_s: Deprecated: ``follow_interval`` in seconds.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        filesystem: pafs.FileSystem | None = None,
        follow: bool = False,
        follow_interval: timedelta | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
        follow_interval_s: float | None = None,
    ) -> None:
        check_filesystem("arrow ipc source", filesystem)
        interval = seconds_keywords(
            ArrowIPCSourceConfig.component,
            {"follow_interval": follow_interval},
            {"follow_interval_s": follow_interval_s},
        )
        self.config = ArrowIPCSourceConfig.build(
            {"path": path, "follow": follow, "metadata_prefix": metadata_prefix, **interval}
        )
        self.path = self.config.path
        self.filesystem = filesystem
        self.follow = self.config.follow
        self.columns = self.config.columns
        self._listed: list[str] | None = None
        self._watch: FileWatch | None = None
        self._lock = threading.Lock()

    @property
    def follow_interval_s(self) -> float:
        """Seconds between listings when following (from :attr:`config`)."""
        return self.config.follow_interval.total_seconds()

    def _files(self) -> IPCFiles:
        # The glob is split off first: a URI parser may refuse its `[`, `*` or `?`.
        text, pattern = split_glob(self.path.rstrip("/") or "/")
        if self.filesystem is not None:
            fs, local = self.filesystem, isinstance(self.filesystem, pafs.LocalFileSystem)
        elif "://" in text:
            try:
                fs, text = pafs.FileSystem.from_uri(text)
            except (pa.ArrowException, ValueError) as exc:
                msg = (
                    f"arrow ipc source: cannot open `{redact_url(self.path)}` "
                    f"({type(exc).__name__}); expected a directory, glob or file URI pyarrow "
                    f"can open (or pass `filesystem=`)"
                )
                raise ConfigError(msg) from None
            local = isinstance(fs, pafs.LocalFileSystem)
        else:
            fs, local, text = pafs.LocalFileSystem(), True, os.path.abspath(text)
        return IPCFiles(fs, text.rstrip("/") or "/", pattern, local)

    def files(self) -> list[str]:
        """The files this source reads: per directory, in read order (listed once)."""
        with self._lock:
            if self._listed is None:
                files = self._files()
                grouped = by_directory(files.list())
                self._listed = [p for group in grouped.values() for p in group]
                if not self._listed:
                    logger.warning(
                        "arrow ipc source: `%s` holds no visible .arrow or .arrows file",
                        redact_url(self.path),
                    )
            return self._listed

    def directories(self) -> dict[str, list[str]]:
        """Each partition's directory and its files in read order."""
        return by_directory(self.files())

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(d, 0) for d in self.directories()])

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: tuple[str, int] | None
    ) -> IPCDirectoryPartition:
        crossings.note_readers([for_part])
        directory, _ = decode_part(for_part)
        files = self._files()
        paths = self.directories().get(directory)
        if paths is None:  # gone since the listing: a resume says so, a fresh start ends
            paths = []
        watch = None
        if self.follow:
            with self._lock:
                if self._watch is None:
                    listed = self._listed if self._listed is not None else files.list()
                    self._watch = FileWatch(files, listed, self.follow_interval_s)
                watch = self._watch
        if resume_state is not None:
            logger.info(
                "arrow ipc source %s: `%s` resumes in `%s`", step_id, directory, resume_state
            )
        return IPCDirectoryPartition(
            key=for_part,
            directory=directory,
            paths=paths,
            files=files,
            columns=self.columns,
            resume=resume_state,
            watch=watch,
            follow_interval_s=self.follow_interval_s,
        )
