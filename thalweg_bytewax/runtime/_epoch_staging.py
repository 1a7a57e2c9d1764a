"""How an epoch sink partition stages a batch: checked, skipped where covered, stamped.

For each batch, in order: the intake checks (:mod:`~thalweg_bytewax.runtime._epoch_intake`),
the replay check, the coverage the commit will claim, ``<prefix>emit_ts`` stamped with
the write time, then the sink's ``stage()`` hook and the admission acknowledgement.
Private to :mod:`thalweg_bytewax.runtime.epoch_sink`, whose
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition` mixes
:class:`EpochStaging` in.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Final, Protocol

import numpy as np
import pyarrow as pa

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage._replay_check import Ledger, ReplayCheck
from thalweg_bytewax.coverage.input_span import input_span, without_input_span
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes.dlq import DLQ_REASON, DLQ_RULES, DLQ_STEP_ID
from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.records.uniform import int_bounds
from thalweg_bytewax.runtime import admission, crossings
from thalweg_bytewax.runtime._epoch_coverage import widen
from thalweg_bytewax.runtime.sink_locators import UNLOCATED, LocatorMode

if TYPE_CHECKING:
    from thalweg_bytewax.runtime.sink_stats import EpochSinkStats

__all__ = ["EpochStaging"]


class _Partition(Protocol):
    """What staging reads of the partition it is mixed into."""

    unlocated_remedy: ClassVar[str]
    component: str
    columns: MetadataColumns
    locators: LocatorMode

    @property
    def stats(self) -> EpochSinkStats: ...

    _replay: ReplayCheck
    _acknowledge_as: tuple[str, str] | None
    _unlocated_pending: bool

    def stage(self, key: str, rows: pa.RecordBatch) -> None: ...

    def _split(
        self, batch: pa.RecordBatch
    ) -> list[tuple[str, str, int, pa.RecordBatch, int, int]]: ...

    def _ledger(self, key: str, topic: str, partition: int) -> Ledger: ...

    def _check_order(self, ledger: Ledger, key: str, first: int, last: int) -> None: ...

    def _write_unlocated(self, batch: pa.RecordBatch, now_us: int) -> None: ...


class EpochStaging:
    """The per-batch staging of an epoch sink partition (``write_batch``'s body)."""

    def _write(self: _Partition, values: list[pa.RecordBatch]) -> None:
        now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
        for given in values:
            if given.num_rows == 0:
                continue
            if self.locators == "absent":
                self._write_unlocated(without_input_span(given), now_us)
                continue
            span = input_span(given)
            batch = without_input_span(given)
            ack = self._acknowledge_as if not _is_dead_letter(batch) else None
            for key, topic, partition, group, group_first, group_last in self._split(batch):
                first, last = group_first, group_last
                crossings.arrived(key, group.num_rows)
                ledger = self._ledger(key, topic, partition)
                # Order first, coverage second: a row that goes back within a run may
                # fall inside a span this run committed, and skipping it as a replay
                # would lose it silently.
                self._check_order(ledger, key, first, last)
                covered = None  # the coverage mask of the rows, where already computed
                if ledger.replay_end is not None:
                    if first < ledger.replay_end:
                        covered = self._replay.check(ledger, key, group)
                    else:
                        ledger.replay_end = ledger.held = None  # past the replay: done
                if span is not None and span[0] == key:
                    # The whole input batch is accounted for: rows here, the rest
                    # rejected upstream. Committed with this epoch, never before.
                    ledger.pending = widen(
                        ledger.pending, [(min(first, span[1]), max(last, span[2]))]
                    )
                rows = self._replay.uncovered(ledger, key, group, first, last, covered)
                self.stats.rows_skipped_replay += group.num_rows - rows.num_rows
                if rows.num_rows == 0:
                    if ack is not None:
                        admission.ledger().acknowledged(ack[0], key, ack[1], last)
                    continue
                staged = [(first, last)]
                if rows is not group:
                    # Only what is not covered yet: never named for rows the target
                    # already holds elsewhere.
                    first, last = int_bounds(rows.column(self.columns.source_offset))
                    staged = ledger.coverage.uncovered(first, last) or [(first, last)]
                # The group's span, not a span from the last commit's rows: a hole
                # between two groups (rows refused by another shard) is not claimed.
                ledger.pending = widen(ledger.pending, staged)
                self.stats.rows_written += rows.num_rows
                self.stage(key, _stamp(rows, self.columns.emit_ts, now_us))
                _faults.checkpoint("epoch_sink.mid_write")  # staged, the epoch still open
                if ack is not None:
                    admission.ledger().acknowledged(ack[0], key, ack[1], last)

    def _write_unlocated(self: _Partition, batch: pa.RecordBatch, now_us: int) -> None:
        """Stage a batch without a locator whole: nothing to own, order or skip."""
        cols = self.columns
        present = [
            n
            for n in (cols.source_topic, cols.source_partition, cols.source_offset)
            if n in batch.schema.names
        ]
        if present:
            msg = (
                f"{self.component}: with locators='absent' batches carry no locator; got "
                f"column `{present[0]}`; pass locators='required' to write them exactly "
                f"once, or drop the locator columns upstream"
            )
            raise ConfigError(msg)
        self.stats.rows_written += batch.num_rows
        self._unlocated_pending = True
        self.stage(UNLOCATED, _stamp(batch, cols.emit_ts, now_us))


_EMIT_TS: Final = pa.timestamp("us", tz="UTC")


def _stamp(batch: pa.RecordBatch, name: str, now_us: int) -> pa.RecordBatch:
    """Set ``name`` to the write time on every row (``_twg_emit_ts``)."""
    values = np.full(batch.num_rows, now_us, dtype=np.int64)
    stamp = pa.Array.from_buffers(_EMIT_TS, batch.num_rows, [None, pa.py_buffer(values)])
    idx = batch.schema.get_field_index(name)
    if idx >= 0:
        return batch.set_column(idx, batch.schema.field(idx), stamp)
    return batch.append_column(pa.field(name, _EMIT_TS), stamp)


def _is_dead_letter(batch: pa.RecordBatch) -> bool:
    names = set(batch.schema.names)
    return DLQ_REASON in names and DLQ_RULES in names and DLQ_STEP_ID in names
