"""The public side of every epoch sink: shards listed, keys routed, partitions built.

A sink lists ``shards`` partitions named ``shard-000``, ``shard-001``, … (in a run of
known size, shard ``s`` on worker ``s mod W`` only:
:func:`~thalweg_bytewax.runtime.parts.listed_on_this_worker`), routes each item key to
one of them with :func:`~thalweg_bytewax.runtime.parts.route` (the same in every process
of a run, so each source partition has one owner: a shard of the worker that reads it,
so batches are not handed between workers or pickled between processes), and builds the
partition of a shard through :meth:`ShardedEpochSink.build_shard`, observed under the
output step's id (its metrics series and health entries). When the sink was
given a coverage store, each built partition records its committed coverage into it
(:meth:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition.record_coverage_to`).
"""

from __future__ import annotations

import os
from abc import abstractmethod
from typing import Generic, TypeVar

import pyarrow as pa
from bytewax.outputs import FixedPartitionedSink
from typing_extensions import override

from thalweg_bytewax.coverage.store import CoverageStore, open_coverage_store
from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition, EpochSinkState
from thalweg_bytewax.runtime.parts import listed_on_this_worker, route

__all__ = ["ShardedEpochSink", "coverage_store_option", "shard_name", "shard_of"]

PartT = TypeVar("PartT", bound=EpochSinkPartition)


def shard_name(index: int) -> str:
    """The partition name of shard ``index``, e.g. ``"shard-003"`` (a recovery key)."""
    return f"shard-{index:03d}"


def shard_of(for_part: str) -> int:
    """The shard index of a partition name: the integer after its last ``-``."""
    return int(for_part.rpartition("-")[2])


def coverage_store_option(
    store: CoverageStore | str | os.PathLike[str] | None,
) -> CoverageStore | None:
    """Open a sink's ``coverage_store=`` option: a store, a path or URL, or None."""
    return open_coverage_store(store) if store is not None else None


class ShardedEpochSink(FixedPartitionedSink[pa.RecordBatch, EpochSinkState], Generic[PartT]):
    """Base of the public epoch sinks: ``shards`` partitions, routing by item key.

    A subclass sets :attr:`shards` (and :attr:`coverage_store` when it records coverage)
    in ``__init__`` and implements :meth:`build_shard`.

    Attributes:
        shards: How many partitions the sink lists.
        coverage_store: Where built partitions record their committed coverage, or None.
    """

    shards: int
    coverage_store: CoverageStore | None = None

    @abstractmethod
    def build_shard(self, step_id: str, shard: int, resume_state: EpochSinkState | None) -> PartT:
        """Build the partition of shard ``shard`` (its coverage store is attached after)."""

    def coverage_sink_id(self, step_id: str) -> str:
        """The sink's id in the coverage store: its step id unless the sink names one."""
        return step_id

    @override
    def list_parts(self) -> list[str]:
        return listed_on_this_worker([shard_name(i) for i in range(self.shards)])

    @override
    def part_fn(self, item_key: str) -> int:
        return route(item_key, self.shards)

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: EpochSinkState | None) -> PartT:
        part = self.build_shard(step_id, shard_of(for_part), resume_state)
        part.observe_as(step_id)
        part.acknowledge_as(step_id)
        if self.coverage_store is not None:
            part.record_coverage_to(self.coverage_store, self.coverage_sink_id(step_id))
        return part
