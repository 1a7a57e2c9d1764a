"""Private: the staging files of a Parquet sink partition and the pool that writes them.

One :class:`TopicPartitionStream` per source partition holds the buffered rows and the
open staging file; row groups are encoded by a process-wide pool of writer threads, and
:func:`close_writer` closes a staging file only after its footer reads back as claimed.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from thalweg_bytewax.errors import SinkTerminalError
from thalweg_bytewax.system.threads import SharedPool

from ..raw_lane._claim import claim_metadata, claim_problem
from ..raw_lane._shards import LaneSinkStats, LaneStream, StagedFile
from ..raw_lane._store import LaneStore, final_name

__all__ = ["ParquetSinkStats", "TopicPartitionStream", "close_writer", "io_pool", "io_threads"]


class ParquetSinkStats(LaneSinkStats):
    """Plain counters of one Parquet sink partition (those of every lane sink)."""

    __slots__ = ()


@dataclass
class TopicPartitionStream(LaneStream[pq.ParquetWriter]):
    """The buffered rows and the open staging file of one source partition."""

    current_rows: int = 0
    # The offsets of the open file (its rows and the buffer's): always inside one span
    # of the epoch's pending coverage, so the name never spans a hole the base does
    # not claim (rows refused on another shard).
    open_span: tuple[int, int] | None = None
    buffer: list[pa.RecordBatch] = field(default_factory=list)
    buffer_rows: int = 0
    buffer_bytes: int = 0
    last_write: Future[None] | None = None


def io_threads() -> int:
    """The writer threads of the process: one per core, at most four."""
    return min(4, os.cpu_count() or 1)


io_pool = SharedPool(io_threads(), "twg-parquet")
"""One writer pool per process, shared by every sink partition (bounded threads)."""


def close_writer(
    writer: pq.ParquetWriter,
    sink_file: pa.NativeFile | None,
    store: LaneStore,
    staged: StagedFile,
    rows: int,
    offset_column: str,
) -> None:
    """Close a staging file with its claim in the footer, check the footer, fsync it.

    The file gets the name ``<first>-<last>`` only if its footer, read back, holds the
    rows and the offsets that name and the claim say (never a name for rows it lacks).
    """
    writer.add_key_value_metadata(claim_metadata(staged.first, staged.last, rows))
    writer.close()
    if sink_file is not None:
        sink_file.close()
    with store.fs.open_input_file(staged.path) as f:
        problem = claim_problem(pq.read_metadata(f), staged.first, staged.last, rows, offset_column)
    if problem is not None:
        msg = (
            f"parquet sink `{store.root}`: staging file `{staged.path}` is not finalized as "
            f"`{final_name(staged.first, staged.last)}`: {problem}. The epoch fails and "
            f"replays on resume; if it fails again, the file system or pyarrow wrote "
            f"something else than was staged: check the disk and the pyarrow version"
        )
        raise SinkTerminalError(msg)
    store.sync_file(staged.path)
