"""``RawLaneSourceConfig``: every setting of a ``RawLaneSource``, in one frozen model.

The same object comes from a ``RawLaneSource``'s keywords and from a pipeline's
``[source]`` table with ``kind = "raw_lane"`` (and ``THALWEG_SOURCE__*`` variables,
``--set source.*`` overrides): a pipeline that reads a raw lane back instead of Kafka,
every offset the lane holds unless ``offsets`` narrows it. The lane's file system (a
``pyarrow.fs.FileSystem``) and a progress callback are objects, not settings: they are
given to ``RawLaneSource`` beside the configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from thalweg_bytewax.config import ConnectorConfig
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns, metadata_columns
from thalweg_bytewax.runtime.parts import decode_part, encode_part

__all__ = ["DEFAULT_BATCH_SIZE", "RawLaneSourceConfig", "offsets_by_key"]

# As KafkaSource's default poll budget: the flow downstream sees batches of the size it
# sees live, so decode and the sinks run at their measured rate (docs/benchmarks.md).
DEFAULT_BATCH_SIZE = 10_000


def _text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def offsets_by_key(
    offsets: Mapping[tuple[str, int], OffsetCoverage],
) -> dict[str, list[tuple[int, int]]]:
    """A plan per ``(topic, partition)`` as the configuration holds it: spans by partition key.

    Raises:
        ConfigError: When a plan is not an ``OffsetCoverage``.
    """
    out: dict[str, list[tuple[int, int]]] = {}
    for key, plan in offsets.items():
        cov = OffsetCoverage.checked(plan, f"raw lane source: offsets of `{key}`")
        if cov:
            out[encode_part(*key)] = list(cov.spans)
    return out


class RawLaneSourceConfig(ConnectorConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.raw_lane.RawLaneSource`.

    Build it from keywords (``RawLaneSourceConfig(path="thalweg-data/raw")``), load it as
    a pipeline's ``[source]`` (``kind = "raw_lane"``), or let ``RawLaneSource`` build it
    from its own keywords; ``RawLaneSource.from_config`` takes it whole.
    """

    component: ClassVar[str] = "raw lane source"

    kind: Literal["raw_lane"] = "raw_lane"
    """The source kind, as a pipeline's `[source]` table names it."""
    path: Annotated[str, BeforeValidator(_text), Field(min_length=1)]
    """The raw lane directory or URI (a `ParquetSink`'s `path`; in a pipeline, relative
    paths are under `data_dir`)."""
    offsets: dict[str, list[tuple[int, int]]] | None = None
    """The offsets to replay, by partition key: `{ "orders:0" = [[400, 799]] }`, spans
    inclusive; unset = every offset the lane's finalized files hold."""
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    """Rows per emitted batch at most."""
    metadata_prefix: str = DEFAULT_PREFIX
    """The prefix of the metadata columns."""

    @model_validator(mode="after")
    def _checked(self) -> Self:
        metadata_columns(self.metadata_prefix, "raw lane source")
        for key, spans in (self.offsets or {}).items():
            try:
                decode_part(key)
                OffsetCoverage(spans)  # first <= last, offsets >= 0
            except ConfigError as exc:
                msg = f"raw lane source: `offsets` of `{key}`: {exc}"
                raise ConfigError(msg) from None
        return self

    @cached_property
    def columns(self) -> MetadataColumns:
        """The metadata columns of :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)

    def plan(self) -> dict[tuple[str, int], OffsetCoverage] | None:
        """:attr:`offsets` per ``(topic, partition)``; ``None`` when unset (the whole lane)."""
        if self.offsets is None:
            return None
        return {decode_part(k): OffsetCoverage(v) for k, v in self.offsets.items() if v}
