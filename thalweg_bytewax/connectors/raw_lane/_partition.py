"""Private: the partition of a raw lane source, one topic-partition's planned offsets.

It reads only the finalized files that overlap its offsets, in offset order, row group
by row group (row groups outside the offsets are skipped by their statistics), and emits
batches of at most ``batch_size`` rows. Its state is the next offset to emit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bytewax.inputs import StatefulSourcePartition
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.records.model import KeyedBatch

from ._contents import LaneFile, io_error
from ._store import LaneStore
from .config import RawLaneSourceConfig

__all__ = ["ProgressCallback", "RawLanePartition"]

ProgressCallback = Callable[[str, int], None]
"""Called with a partition key and how many of its planned offsets are now replayed."""


class RawLanePartition(StatefulSourcePartition[KeyedBatch, int]):
    """One topic-partition's planned offsets, read from its lane files in offset order."""

    def __init__(  # noqa: PLR0913 - the partition's plan, files, position and reporting
        self,
        config: RawLaneSourceConfig,
        store: LaneStore,
        key: str,
        plan: OffsetCoverage,
        files: list[LaneFile],
        next_offset: int,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Start reading ``key``'s files at ``next_offset``."""
        self._config = config
        self._progress = progress
        self._store = store
        self._key = key
        self._plan = plan
        self._offset_col = config.columns.source_offset
        self._next_offset = next_offset
        last = plan.last if plan.last is not None else -1
        # Only files that hold planned offsets at or after the resume position.
        self._files = [
            f for f in files if f[1] >= next_offset and f[0] <= last and plan.overlaps(f[0], f[1])
        ]
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._file: pa.NativeFile | None = None
        self._report()

    def _report(self) -> None:
        if self._progress is None:
            return
        done = sum(
            min(hi, self._next_offset - 1) - lo + 1
            for lo, hi in self._plan.spans
            if lo < self._next_offset
        )
        self._progress(self._key, done)

    def _open_next(self) -> Iterator[pa.RecordBatch] | None:
        self._close_file()
        while self._files:
            _, _, path = self._files.pop(0)
            try:
                self._file = self._store.fs.open_input_file(path)
                f = pq.ParquetFile(self._file)
            except (OSError, pa.ArrowException) as exc:
                raise io_error(self._config.path, f"open `{path}`", exc) from exc
            groups = self._row_groups(f)
            if groups:
                batches: Iterator[pa.RecordBatch] = f.iter_batches(
                    batch_size=self._config.batch_size, row_groups=groups
                )
                return batches
        return None

    def _row_groups(self, f: pq.ParquetFile) -> list[int]:
        """The row groups whose offsets overlap the plan at or after the next offset."""
        meta = f.metadata
        idx = f.schema_arrow.get_field_index(self._offset_col)
        keep = []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(idx).statistics if idx >= 0 else None
            if stats is None or not stats.has_min_max:
                keep.append(i)
            elif stats.max >= self._next_offset and self._plan.overlaps(
                max(stats.min, self._next_offset), stats.max
            ):
                keep.append(i)
        return keep

    @override
    def next_batch(self) -> list[KeyedBatch]:
        while True:
            if self._batches is None:
                self._batches = self._open_next()
                if self._batches is None:
                    self._next_offset = max(self._next_offset, (self._plan.last or 0) + 1)
                    self._report()
                    raise StopIteration
            try:
                batch = next(self._batches)
            except StopIteration:
                self._batches = None
                continue
            except (OSError, pa.ArrowException) as exc:
                raise io_error(self._config.path, f"read `{self._key}`", exc) from exc
            offsets = batch.column(self._offset_col)
            mask = self._plan.mask(offsets)
            mask &= offsets.to_numpy(zero_copy_only=False) >= self._next_offset
            rows = batch.filter(pa.array(mask)) if not mask.all() else batch
            if rows.num_rows == 0:
                continue
            self._next_offset = int(pc.max(rows.column(self._offset_col)).as_py()) + 1
            self._report()
            return [(self._key, rows)]

    @override
    def next_awake(self) -> datetime | None:
        return None

    @override
    def snapshot(self) -> int:
        return self._next_offset

    def _close_file(self) -> None:
        self._batches = None
        if self._file is not None:
            self._file.close()
            self._file = None

    @override
    def close(self) -> None:
        self._close_file()
