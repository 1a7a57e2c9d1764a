"""Private: what an Iceberg sink partition stages in one epoch, until its commit.

The rows staged (batches not yet handed to data files, and in ``append`` mode the
Parquet data files written from them as they accumulate), the offsets staged per source
partition, and whether rows without a locator were staged. :func:`last_per_key` is an
upsert epoch's rows, one per key. The partition (:mod:`._partition`) decides when to
write and commit.

A flow in tail mode hands the sink many small batches an epoch (a few rows each), and
each one, as a SQL step returns it, holds native memory far beyond its rows. So every
:data:`COALESCE_BATCHES` small batches of one schema are copied into one
(:func:`pyarrow.concat_batches`): the epoch holds a few batches of its rows, not
hundreds of allocations that are freed only at its commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.records.uniform import int_bounds
from thalweg_bytewax.runtime.epoch_sink import buffered_size

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

__all__ = ["COALESCE_BATCHES", "COALESCE_MAX_BYTES", "EpochStage", "last_per_key"]

COALESCE_BATCHES: Final = 64
"""Batches staged since the last coalescing before they are copied into one."""

COALESCE_MAX_BYTES: Final = 8 << 20
"""The most buffer bytes a run of batches may hold to be coalesced.

Large batches, and slices of them (a flow catching up), gain nothing from the copy:
they are left as given.
"""


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
        self._settled = 0  # the buffered batches past which coalescing has not looked

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
        if len(self.batches) - max(self._settled, self._measured) >= COALESCE_BATCHES:
            self._coalesce()

    def _coalesce(self) -> None:
        """Copy each run of one schema among the batches not looked at yet into one.

        Only batches past ``_measured`` are merged, so ``_bytes`` stays exact up to it:
        the run's buffer sizes leave the bound and the copy's enter it (measured by
        :meth:`full` like any other). Rows keep their order, so the last row of a key
        stays the last.
        """
        start = max(self._settled, self._measured)
        tail = self.batches[start:]
        merged: list[pa.RecordBatch] = []
        run: list[pa.RecordBatch] = []
        for batch in tail:
            if run and not batch.schema.equals(run[0].schema):
                merged.extend(self._merged(run))
                run = []
            run.append(batch)
        merged.extend(self._merged(run))
        self.batches[start:] = merged
        self._settled = len(self.batches)

    def _merged(self, run: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """``run`` as one batch, or as given when it is one batch or too large to copy."""
        if len(run) < 2:
            return run
        # Buffer sizes, not ``buffered_size`` (tens of times the cost): slices of a large batch
        # count its buffers and are left as given, a flow catching up.
        given = sum(b.get_total_buffer_size() for b in run)
        if given > COALESCE_MAX_BYTES:
            return run
        one = pa.concat_batches(run)
        self._bytes += one.get_total_buffer_size() - given
        return [one]

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
        self._bytes = self._measured = self._settled = 0
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
