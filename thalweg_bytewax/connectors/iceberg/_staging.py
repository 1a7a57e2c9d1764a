"""Private: what an Iceberg sink partition stages in one epoch, until its commit.

The rows staged (batches not yet handed to data files, and in ``append`` mode the
Parquet data files written from them as they accumulate), the offsets staged per source
partition, and whether rows without a locator were staged. :func:`last_per_key` is an
upsert epoch's rows, one per key. The partition (:mod:`._partition`) decides when to
write and commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.records.uniform import int_bounds
from thalweg_bytewax.runtime.epoch_sink import buffered_size

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

__all__ = ["EpochStage", "last_per_key"]


class EpochStage:
    """The rows, data files and offsets one Iceberg sink partition staged this epoch."""

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.files: list[DataFile] = []
        # Per source partition, the offsets staged since the last commit: each staged
        # group's span, never a hole between two (rows refused on another shard).
        self.pending: dict[str, OffsetCoverage] = {}
        self.unlocated = False  # rows without a locator staged this epoch
        self._bytes = 0  # an upper bound, exact up to ``_measured``
        self._measured = 0  # the buffered batches whose exact size is counted

    def __bool__(self) -> bool:
        """Whether anything was staged this epoch (else there is nothing to commit)."""
        return bool(self.pending) or self.unlocated

    def offsets(self, key: str, offsets: pa.Array) -> None:
        """Note the offsets of rows of source partition ``key`` staged."""
        first, last = int_bounds(offsets)
        pending = self.pending.get(key)
        staged = OffsetCoverage([(first, last)])
        self.pending[key] = staged if pending is None else pending.union(staged)

    def add(self, rows: pa.RecordBatch) -> None:
        """Buffer a batch of rows conformed to the table."""
        self.batches.append(rows)
        self._bytes += rows.get_total_buffer_size()

    @property
    def nbytes(self) -> int:
        """The buffered rows' Arrow bytes.

        Exact after :meth:`full` found them full, an upper bound otherwise.
        """
        return self._bytes

    def full(self, target: int) -> bool:
        """Whether the buffered rows reach ``target`` bytes.

        Each batch adds its buffers' total size, which is cheap but overcounts a batch
        sliced from larger buffers; only when that bound reaches the target are the
        batches not measured yet measured exactly (``nbytes``, ~15x the cost), each once.
        """
        if self._bytes < target:
            return False
        unmeasured = self.batches[self._measured :]
        exact = self._bytes - sum(b.get_total_buffer_size() for b in unmeasured)
        self._bytes = exact + sum(buffered_size(b) for b in unmeasured)
        self._measured = len(self.batches)
        return self._bytes >= target

    def take_batches(self) -> list[pa.RecordBatch]:
        """The buffered batches, the buffer emptied (they are written to data files)."""
        batches = self.batches
        self.batches = []
        self._bytes = self._measured = 0
        return batches

    def clear(self) -> None:
        """Forget everything staged (after the commit, or an abort)."""
        self.take_batches()
        self.files = []
        self.pending = {}
        self.unlocated = False


def last_per_key(batches: list[pa.RecordBatch], keys: list[str]) -> pa.Table:
    """An upsert epoch's rows, one per key: the last one staged wins."""
    # A schema evolved mid-epoch leaves batches of two shapes: promote to the newer.
    data = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in batches], promote_options="default"
    )
    index = "__thalweg_row__"
    data = data.append_column(index, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    last = data.group_by(keys, use_threads=False).aggregate([(index, "max")])
    keep = pc.sort_indices(last.column(f"{index}_max"))
    rows = data.take(pc.take(last.column(f"{index}_max"), keep))
    return rows.drop_columns([index])
