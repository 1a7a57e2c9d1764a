"""Private: the public side the Parquet and Arrow IPC lane sinks share.

Both take their settings from a configuration model, set the attributes
:class:`~thalweg_bytewax.runtime.sharded_sink.ShardedEpochSink` reads, probe the lane's
path when Bytewax lists their partitions (a bad path fails before data moves) and build
each shard's partition over the shard's prepared store (:class:`~._shards.LaneShards`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar

import pyarrow.fs as pafs
from typing_extensions import override

from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option

from .._epoch_partition import SinkSettings
from ._shards import LaneShards

if TYPE_CHECKING:
    from thalweg_bytewax.coverage.store import CoverageStore
    from thalweg_bytewax.runtime.epoch_sink import EpochSinkState

    from ._store import LaneStore

__all__ = ["LaneSink", "LaneSinkSettings"]


class LaneSinkSettings(SinkSettings, Protocol):
    """What a lane sink's configuration model holds: a sink's settings and the lane's path."""

    component: ClassVar[str]

    @property
    def path(self) -> str:
        """The lane's directory, URI or path on the sink's file system."""
        ...


ConfigT = TypeVar("ConfigT", bound=LaneSinkSettings)
PartT = TypeVar("PartT", bound=EpochSinkPartition)


class LaneSink(ShardedEpochSink[PartT], Generic[PartT, ConfigT]):
    """A sink that writes a lane directory, one partition per shard over its own store.

    Args:
        config: The sink's settings (its ``config`` attribute).
        filesystem: A ``pyarrow.fs.FileSystem``, or None for a local path or URI.
        coverage_store: The sink's ``coverage_store=`` option.
        partition: Builds a shard's partition from the settings, the shard's store,
            its resume state and its index.
        log: The sink's logger (stale staging files removed are logged there).
    """

    def __init__(
        self,
        config: ConfigT,
        filesystem: pafs.FileSystem | None,
        coverage_store: CoverageStore | str | os.PathLike[str] | None,
        partition: Callable[[ConfigT, LaneStore, EpochSinkState | None, int], PartT],
        log: logging.Logger,
    ) -> None:
        self.config = config
        self.path = config.path
        self.filesystem = filesystem
        self.shards = config.shards
        self.columns = config.columns
        self.coverage_store = coverage_store_option(coverage_store)
        self._partition = partition
        self._lane = LaneShards(config.path, filesystem, config.component, log)

    @override
    def list_parts(self) -> list[str]:
        self._lane.store()  # a bad path fails at build time, before data moves
        return super().list_parts()

    @override
    def build_shard(self, step_id: str, shard: int, resume_state: EpochSinkState | None) -> PartT:
        store = self._lane.prepare(step_id, shard)
        return self._partition(self.config, store, resume_state, shard)
