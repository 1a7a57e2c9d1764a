"""Arrow IPC out: a directory of ``.arrow`` files, exactly once (see the package for the layout).

:class:`ArrowIPCSink` is an epoch sink
(:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`): within an epoch each
source partition's batches are appended to a hidden staging file (``.staging-*``, which
readers skip); when Bytewax snapshots the epoch every staging file is closed (the IPC
footer written), fsynced and hard-linked under its deterministic final name (a final
file is never overwritten), and the directory is fsynced, before the snapshot returns.
On resume the finalized names of each source partition give the offsets already held,
and replayed rows are skipped (the first ones checked by record id).
"""

from __future__ import annotations

import logging
import os

import pyarrow.fs as pafs

from thalweg_bytewax.connectors._filesystem import check_filesystem
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

from ..raw_lane._lane_sink import LaneSink
from ._partition import ArrowIPCSinkStats, _ArrowIPCPartition
from .config import DEFAULT_MAX_FILE_ROWS, ArrowIPCSinkConfig

__all__ = ["ArrowIPCSink", "ArrowIPCSinkStats"]

logger = logging.getLogger(__name__)


class ArrowIPCSink(LaneSink[_ArrowIPCPartition, ArrowIPCSinkConfig]):
    """Write keyed batches with locator columns as a directory of Arrow IPC files.

    Source topic-partitions are the unit of parallelism: each gets its own file per
    epoch. Exactly-once: files are finalized (fsync + atomic link under a name that is
    never overwritten) when Bytewax snapshots the epoch, names are deterministic from
    (topic, partition, first offset, last offset), and replayed rows that finalized
    files already cover are skipped. Each row gets ``_twg_emit_ts``. Another process
    reads the finished files with ``pyarrow.ipc.open_file(pyarrow.memory_map(path))``,
    or a flow with :class:`ArrowIPCSource`. One file holds one schema: a batch with
    another schema starts a new file.

    Example::

        flow = Dataflow("to_ipc")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("ipc", raw, ArrowIPCSink("lake/ipc"))

    The keywords other than ``filesystem`` and ``coverage_store`` build an
    :class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSinkConfig` (:attr:`config`),
    the model a pipeline's ``[sinks.<name>]`` table with ``kind = "arrow_ipc"`` builds
    too; the sink's partitions read only that model.

    Args:
        path: A local directory, a URI (``file://``, ``s3://``, …) or, with
            ``filesystem``, a path on that file system.
        filesystem: A ``pyarrow.fs.FileSystem`` (wrap fsspec file systems in
            ``pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))``).
        shards: Number of sink partitions the topic-partitions are spread over. Keep it
            fixed for a directory.
        format: ``"file"`` (IPC file format, ``.arrow``: random access, readers can
            memory-map it) or ``"stream"`` (IPC stream format, ``.arrows``).
        compression: ``"none"`` (default: a memory-mapped read copies nothing),
            ``"lz4"`` or ``"zstd"`` (smaller files; a reader decompresses each batch).
        max_file_rows: Rows after which a file is closed within an epoch.
        metadata_prefix: Prefix of the metadata columns.
        coverage_store: Where to record each committed epoch's coverage, under the
            output's step id (as ``ParquetSink``'s). None records nothing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        filesystem: pafs.FileSystem | None = None,
        shards: int = 16,
        format: str = "file",  # noqa: A002 - the documented name, as FileSource's
        compression: str | None = "none",
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> None:
        check_filesystem("arrow ipc sink", filesystem)
        config = ArrowIPCSinkConfig.build(
            {
                "path": path,
                "shards": shards,
                "format": format,
                "compression": compression,
                "max_file_rows": max_file_rows,
                "metadata_prefix": metadata_prefix,
            }
        )
        super().__init__(config, filesystem, coverage_store, _ArrowIPCPartition, logger)
