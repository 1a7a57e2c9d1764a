"""The raw lane as a source: replay chosen offsets of a Parquet raw lane, in order.

:class:`RawLaneSource` reads the RawBatches a ``ParquetSink`` raw lane holds
(``<lane>/<topic>/<partition>/<first>-<last>.parquet``) back into a dataflow, exactly as
the source once emitted them: payload bytes, headers and every locator column. It is
what ``thalweg recover`` puts in place of the flow's Kafka source, so the replay goes
through the flow's own decode → contract → SQL path into the lagging sink, and Kafka is
never contacted.

Topic-partitions are the unit of parallelism: one Bytewax partition per source
topic-partition in the plan. Each reads only the finalized files that overlap its
offsets, in offset order, row group by row group (row groups outside the offsets are
skipped by their statistics), and emits batches of at most ``batch_size`` rows, so
memory stays bounded whatever the lane's size. Its state is the next offset to emit:
with a recovery directory, a recovery that is killed resumes after the last batch of
its last completed epoch. The sink skips offsets it already holds, so a replay is
written once.

:func:`lane_held_offsets` says which offsets a raw lane's files still hold, from their
names alone (the retention guard of :mod:`thalweg_bytewax.coverage.recovery_plan`);
:func:`lane_rows_missing` checks those names against the rows the files hold, from
their offsets column (the lane check).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Self

import pyarrow as pa
import pyarrow.fs as pafs
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part

from .._construct import construct
from ._contents import io_error, lane_files, lane_held_offsets
from ._partition import ProgressCallback, RawLanePartition
from ._store import open_store
from .config import DEFAULT_BATCH_SIZE, RawLaneSourceConfig, offsets_by_key

__all__ = ["RawLaneSource"]

logger = logging.getLogger(__name__)


class RawLaneSource(FixedPartitionedSource[KeyedBatch, int]):
    """Replay chosen offsets of a raw lane as keyed RawBatches, in offset order.

    Topic-partitions are the unit of parallelism; the state of each is the next offset
    to emit. Exactly-once with a sink that skips the offsets it holds (every epoch
    sink does): a replay after a crash is skipped, not written twice.

    Example::

        plan = {("orders", 0): OffsetCoverage([(400, 799)])}
        flow = Dataflow("orders")
        raw = op.input("orders_in", flow, RawLaneSource("thalweg-data/raw", plan))

    Args:
        lane: The raw lane directory or URI (``ParquetSink``'s ``path``).
        offsets: Per ``(topic, partition)``, the offsets to replay; ``None``: every
            offset the lane's finalized files hold (listed when the flow starts).
        filesystem: A ``pyarrow.fs.FileSystem`` for ``lane``.
        batch_size: Rows per emitted batch at most.
        metadata_prefix: Prefix of the metadata columns.
        progress: Called after each batch with the partition key and how many of its
            planned offsets are replayed (offsets, not rows: a lane has holes).

    The settings are one frozen :class:`RawLaneSourceConfig` (:attr:`config`), what a
    pipeline's ``[source]`` table with ``kind = "raw_lane"`` loads.
    """

    def __init__(  # noqa: PLR0913 - the documented keywords
        self,
        lane: str | os.PathLike[str],
        offsets: Mapping[tuple[str, int], OffsetCoverage] | None,
        *,
        filesystem: pafs.FileSystem | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        metadata_prefix: str = DEFAULT_PREFIX,
        progress: ProgressCallback | None = None,
    ) -> None:
        if not isinstance(lane, str | os.PathLike) or not os.fspath(lane):
            msg = f"raw lane source: `lane` expected a raw lane directory or URI; got {lane!r}"
            raise ConfigError(msg)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"raw lane source: `batch_size` expected an integer >= 1; got {batch_size!r}"
            raise ConfigError(msg)
        values = {
            "path": os.fspath(lane),
            "offsets": None if offsets is None else offsets_by_key(offsets),
            "batch_size": batch_size,
            "metadata_prefix": metadata_prefix,
        }
        config = RawLaneSourceConfig.build(values)
        self._start(config, filesystem, progress)

    @classmethod
    def from_config(
        cls,
        config: RawLaneSourceConfig,
        *,
        filesystem: pafs.FileSystem | None = None,
        progress: ProgressCallback | None = None,
    ) -> Self:
        """The source a :class:`RawLaneSourceConfig` describes (a pipeline's ``[source]``).

        Raises:
            ConfigError: When ``config`` is not a ``RawLaneSourceConfig``.
        """
        return construct(cls, cls._start, RawLaneSourceConfig.checked(config), filesystem, progress)

    def _start(
        self,
        config: RawLaneSourceConfig,
        filesystem: pafs.FileSystem | None,
        progress: ProgressCallback | None,
    ) -> None:
        self.config = config
        self.filesystem = filesystem
        self.progress = progress
        self._plan = config.plan()

    @property
    def lane(self) -> str:
        """The raw lane directory or URI."""
        return self.config.path

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns the lane's files carry."""
        return self.config.columns

    @property
    def offsets(self) -> dict[tuple[str, int], OffsetCoverage]:
        """The offsets to replay per ``(topic, partition)`` (the lane's, when unset)."""
        if self._plan is None:
            self._plan = dict(lane_held_offsets(self.lane, filesystem=self.filesystem))
        return self._plan

    @offsets.setter
    def offsets(self, offsets: Mapping[tuple[str, int], OffsetCoverage]) -> None:
        values = {**self.config.model_dump(), "offsets": offsets_by_key(offsets)}
        self.config = RawLaneSourceConfig.build(values)
        self._plan = self.config.plan()

    @override
    def list_parts(self) -> list[str]:
        return announce_listing([encode_part(t, p) for t, p in sorted(self.offsets)])

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> RawLanePartition:
        crossings.note_readers([for_part])
        key = decode_part(for_part)
        plan = self.offsets.get(key)
        if plan is None:
            msg = (
                f"raw lane source `{step_id}`: partition `{for_part}` expected one of the "
                f"planned partitions; got a resume state for it (use a fresh recovery "
                f"directory for a new recovery plan)"
            )
            raise ConfigError(msg)
        store = open_store(self.lane, self.filesystem)
        try:
            files = lane_files(store, *key)
        except (OSError, pa.ArrowException) as exc:
            raise io_error(self.lane, f"list `{for_part}`", exc) from exc
        start = resume_state if resume_state is not None else plan.first or 0
        if resume_state is not None:
            logger.info("raw lane source: `%s` resumes at offset %s", for_part, start)
        return RawLanePartition(self.config, store, for_part, plan, files, start, self.progress)
