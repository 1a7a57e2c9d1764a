"""Private: an epoch sink partition started from its sink's settings, as connectors build them.

Every connector's sink partition takes the metadata columns and the shard count from
its sink's configuration model and keeps that model; :class:`ConfiguredSinkPartition`
does this once. The epoch protocol itself is
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from thalweg_bytewax.runtime.epoch_sink import EpochSinkPartition

if TYPE_CHECKING:
    from thalweg_bytewax.records.metadata import MetadataColumns
    from thalweg_bytewax.runtime.epoch_sink import EpochSinkState, EpochSinkStats, LocatorMode

__all__ = ["TABLE_UNLOCATED_REMEDY", "ConfiguredSinkPartition", "SinkSettings"]

TABLE_UNLOCATED_REMEDY = (
    "keep the locator with metadata='locator' or 'all', or, for rows that have none "
    "(another source, window results), build the sink with locators='absent' "
    "(at-least-once appends, effectively-once upserts by key)"
)
"""The end of a table sink's message for a batch without locator columns."""


class SinkSettings(Protocol):
    """What a sink's configuration model tells each of its partitions."""

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns the sink's rows carry."""
        ...

    @property
    def shards(self) -> int:
        """How many partitions the sink lists."""
        ...


ConfigT = TypeVar("ConfigT", bound=SinkSettings)


class ConfiguredSinkPartition(EpochSinkPartition, Generic[ConfigT]):
    """An epoch sink partition that keeps its sink's settings as ``_config``.

    Args:
        component: The name messages give the sink (e.g. ``"parquet sink"``).
        config: The sink's configuration model: its ``columns`` and ``shards`` are used.
        resume: The state Bytewax resumed this partition with, if any.
        shard: This partition's index among the sink's ``config.shards``.
        stats: The counters to update (a sink's own subclass).
        locators: ``"required"`` or ``"absent"``, as for ``EpochSinkPartition``.
    """

    def __init__(
        self,
        component: str,
        config: ConfigT,
        resume: EpochSinkState | None,
        shard: int,
        *,
        stats: EpochSinkStats | None = None,
        locators: LocatorMode = "required",
    ) -> None:
        super().__init__(
            component=component,
            columns=config.columns,
            resume_state=resume,
            shard=shard,
            shards=config.shards,
            stats=stats,
            locators=locators,
        )
        self._config = config

    @property
    def config(self) -> ConfigT:
        """The settings of the sink this partition belongs to (one object per sink)."""
        return self._config
