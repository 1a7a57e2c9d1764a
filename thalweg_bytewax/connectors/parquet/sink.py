"""Parquet output: the raw lane, durable at each epoch, exactly once across crashes.

Layout under the lane path::

    <path>/<topic>/<partition>/<first offset>-<last offset>.parquet

Within an epoch a partition appends row groups to hidden staging files
(``.staging-*``, which pyarrow datasets and DuckDB globs never read). When Bytewax
closes the epoch it calls ``snapshot()``: every staging file is closed, fsynced and
atomically renamed to its final, deterministic name, and the directory is fsynced,
*before* the snapshot returns — so the source position Bytewax records never leads
what the lane holds. On resume a partition reads the finalized file names of each
topic-partition it meets and skips replayed rows whose offsets they already cover, so
a crash anywhere (before, during or after a snapshot) leaves every record exactly once.
"""

from __future__ import annotations

import logging
import os
from typing import ClassVar

import pyarrow.fs as pafs

from thalweg_bytewax.connectors._filesystem import check_filesystem
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

from ..raw_lane._lane_sink import LaneSink
from ._partition import _ParquetPartition
from ._stream import ParquetSinkStats
from .config import (
    DEFAULT_BUFFER_BYTES,
    DEFAULT_MAX_FILE_ROWS,
    DEFAULT_ROW_GROUP_BYTES,
    DEFAULT_ROW_GROUP_ROWS,
    ParquetSinkConfig,
)

__all__ = ["ParquetSink", "ParquetSinkStats"]

logger = logging.getLogger(__name__)


class ParquetSink(LaneSink[_ParquetPartition, ParquetSinkConfig]):
    """Write keyed RawBatches (or any batches with locator columns) as a Parquet lane.

    Source topic-partitions are the unit of parallelism: each gets its own file stream,
    so an epoch yields a few large files rather than one per poll. Exactly-once: files
    are finalized (fsync + atomic rename) when Bytewax snapshots the epoch, file names
    are deterministic from (topic, partition, first offset, last offset), and replayed
    rows that finalized files already cover are skipped. The lane reads back as one
    dataset with ``pyarrow.dataset.dataset(path)`` or DuckDB
    ``read_parquet('path/**/*.parquet', union_by_name = true)``. Each row gets
    ``_twg_emit_ts``, the time the sink wrote it.

    The lane keeps one schema that evolves with the batches, as a table would: a new
    column is added (NULL in rows written before it), a batch lacking a nullable column
    or holding a narrower type is cast to the lane's, a lossless widening needs
    ``allow_widening=True``, and anything else (another type, a non-nullable column
    missing) fails the epoch with ``SchemaEvolutionError`` naming the column, its old
    and new type, before any row of the epoch is written: the lane always reads back as
    one table with :func:`~thalweg_bytewax.lanes.read_lane`.

    Example::

        flow = Dataflow("raw_lane")
        raw = op.input("in", flow, KafkaSource(["localhost:9092"], ["orders"]))
        op.output("lane", raw, ParquetSink("lake/raw"))

    The keywords other than ``filesystem`` and ``coverage_store`` build a
    :class:`~thalweg_bytewax.connectors.parquet.ParquetSinkConfig` (:attr:`config`), the
    model a pipeline's ``[sinks.<name>]`` table with ``kind = "parquet"`` builds too; the
    sink's partitions read only that model.

    Args:
        path: A local directory, a URI (``file://``, ``s3://``, ``gs://``, …) or, with
            ``filesystem``, a path on that file system.
        filesystem: A ``pyarrow.fs.FileSystem`` (wrap fsspec file systems in
            ``pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))``).
        shards: Number of sink partitions the topic-partitions are spread over; it
            bounds the sink's parallelism across workers. Keep it fixed for a lane.
        compression: Parquet compression codec.
        row_group_rows: Rows buffered per topic-partition before a row group is written.
        row_group_bytes: Bytes buffered per topic-partition before a row group is written.
        buffer_bytes: Bytes buffered by all of this sink's partitions on one worker:
            beyond it the largest buffer is written as a (smaller) row group, so a
            worker with many topic-partitions holds at most this much, not
            ``row_group_bytes`` per topic-partition, until the epoch's snapshot.
        max_file_rows: Rows after which a file is closed (it still becomes visible only
            at the epoch's snapshot).
        metadata_prefix: Prefix of the metadata columns.
        coverage_store: Where to record each committed epoch's coverage, under the
            output's step id: a :class:`~thalweg_bytewax.coverage.store.CoverageStore`,
            a path (SQLite; a directory holds ``_coverage.sqlite3``) or a
            ``postgresql://`` URL. None records nothing. ``thalweg coverage`` reads it.
        allow_widening: Let a batch widen a column losslessly (``int32`` to ``int64``,
            ``float32`` to ``float64``, a wider decimal) instead of failing the epoch.
    """

    can_be_raw_lane: ClassVar[bool] = True
    """Fed straight from a source, this sink is a raw lane (the second-sink gate)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        filesystem: pafs.FileSystem | None = None,
        shards: int = 16,
        compression: str = "zstd",
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        max_file_rows: int = DEFAULT_MAX_FILE_ROWS,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
        allow_widening: bool = False,
    ) -> None:
        check_filesystem("parquet sink", filesystem)
        config = ParquetSinkConfig.build(
            {
                "path": path,
                "shards": shards,
                "compression": compression,
                "row_group_rows": row_group_rows,
                "row_group_bytes": row_group_bytes,
                "buffer_bytes": buffer_bytes,
                "max_file_rows": max_file_rows,
                "metadata_prefix": metadata_prefix,
                "allow_widening": allow_widening,
            }
        )
        super().__init__(config, filesystem, coverage_store, _ParquetPartition, logger)
