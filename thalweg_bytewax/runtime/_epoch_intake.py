"""What an epoch sink partition checks of each batch before it stages a row.

Rows need a locator; each source partition has one owner shard; offsets are
non-negative and go forward within a run. Private to
:mod:`thalweg_bytewax.runtime.epoch_sink`, whose
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition` mixes
:class:`EpochIntake` in.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.coverage._replay_check import Ledger
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.records.uniform import all_equal, int_bounds
from thalweg_bytewax.runtime.parts import encode_part, route

__all__ = ["EpochIntake"]


class _Partition(Protocol):
    """What the intake checks read of the partition they are mixed into."""

    unlocated_remedy: ClassVar[str]
    merge_remedy: ClassVar[str]
    component: str
    columns: MetadataColumns
    shard: int
    shards: int
    _ledgers: dict[str, Ledger]

    def owner_of(self, key: str) -> int: ...

    def _check_owner(self, key: str) -> None: ...

    def _check_offsets(self, key: str, low: int) -> None: ...


class EpochIntake:
    """The per-batch checks of an epoch sink partition: locators, owner, offset order."""

    def _split(
        self: _Partition, batch: pa.RecordBatch
    ) -> list[tuple[str, str, int, pa.RecordBatch, int, int]]:
        """Group a batch by source partition, checking every group before any is staged.

        Returns ``(key, topic, partition, rows, first offset, last offset)`` per group.
        """
        cols = self.columns
        names = batch.schema.names
        for required in (cols.source_topic, cols.source_partition, cols.source_offset):
            if required not in names:
                msg = (
                    f"{self.component}: batches need the locator columns "
                    f"`{cols.source_topic}`, `{cols.source_partition}` and "
                    f"`{cols.source_offset}` for exactly-once writes; column `{required}` is "
                    f"missing ({self.unlocated_remedy})"
                )
                raise ConfigError(msg)
        topics = batch.column(cols.source_topic)
        parts = batch.column(cols.source_partition)
        offsets = batch.column(cols.source_offset)
        nulls = max(topics.null_count, parts.null_count, offsets.null_count)
        if nulls:
            msg = (
                f"{self.component}: {nulls} rows have no locator (null `{cols.source_topic}`, "
                f"`{cols.source_partition}` or `{cols.source_offset}`); every row needs one "
                f"to be written exactly once"
            )
            raise ConfigError(msg)
        t0, p0 = topics[0].as_py(), parts[0].as_py()
        if all_equal(parts) and all_equal(topics):
            groups = [(encode_part(t0, p0), t0, p0, batch)]
        else:
            table = pa.Table.from_batches([batch])
            grouped = table.group_by([cols.source_topic, cols.source_partition]).aggregate([])
            groups = []
            pairs = zip(grouped.column(0).to_pylist(), grouped.column(1).to_pylist(), strict=True)
            for t, p in pairs:
                mask = pc.and_(pc.equal(topics, t), pc.equal(parts, p))
                groups.append((encode_part(t, p), t, p, batch.filter(mask)))
        out = []
        for key, t, p, rows in groups:
            self._check_owner(key)
            first, last = int_bounds(rows.column(cols.source_offset))
            self._check_offsets(key, first)
            out.append((key, t, p, rows, first, last))
        return out

    def _check_owner(self: _Partition, key: str) -> None:
        """Refuse rows of a source partition that another shard of this sink owns.

        Coverage is per (sink, topic, partition), so exactly one shard may write each:
        the one its key routes to. Rows of one partition arriving under keys that route
        elsewhere (a re-keyed stream, an unnest keyed by another column, a batch
        spanning partitions) would be written by two shards, each skipping the other's
        rows on a replay.
        """
        if key in self._ledgers:
            return  # accepted once: this shard owns it
        owner = self.owner_of(key)
        if owner != self.shard:
            msg = (
                f"{self.component}: rows of `{key}` reached shard {self.shard} but `{key}` "
                f"routes to shard {owner} of {self.shards}; each source partition needs one "
                f"owner in a sink, or two shards overwrite and skip each other's rows. "
                f"Key the stream by its source partition before the sink (the key "
                f"`encode_part(topic, partition)` of `thalweg_bytewax.runtime.parts`, here "
                f"`{key}`), or use `shards=1`"
            )
            raise ConfigError(msg)

    def owner_of(self: _Partition, key: str) -> int:
        """The shard that owns source partition ``key``: the sink's ``part_fn`` routing."""
        return route(key, self.shards)

    def _check_offsets(self: _Partition, key: str, low: int) -> None:
        """Refuse negative offsets: coverage is kept over source offsets, from 0."""
        if low < 0:
            msg = (
                f"{self.component}: rows of `{key}` have offset {low}; expected offsets >= 0 "
                f"(coverage and replay skipping work on source offsets, which start at 0). "
                f"Give every row the non-negative offset of its source record in "
                f"`{self.columns.source_offset}`"
            )
            raise ConfigError(msg)

    def _check_order(self: _Partition, ledger: Ledger, key: str, first: int, last: int) -> None:
        """Refuse rows (offsets ``first``..``last``) that go back in offset order within a run.

        Coverage is skipped by range, which is exact only if each source partition's
        rows arrive in offset order, as they do along one path from a source (derived
        rows may share their origin's offset). Two streams merged into one sink
        interleave, and skipping by range would then drop rows: fail loudly instead.
        """
        if ledger.accepted_last is not None and first <= ledger.accepted_last:
            msg = (
                f"{self.component}: rows of `{key}` arrived out of offset order (offset "
                f"{first} after {ledger.accepted_last}); a sink needs one ordered stream per "
                f"source partition. Do not merge streams into one sink: {self.merge_remedy}"
            )
            raise ConfigError(msg)
        ledger.accepted_last = last
