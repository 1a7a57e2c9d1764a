"""Iceberg output: one commit per epoch, coverage in the snapshot summary, exactly once.

:class:`IcebergSink` writes keyed Arrow batches (with their locator columns) into one
Iceberg table through pyiceberg. The catalog is a SQL catalog on SQLite under a local
warehouse directory by default (no service), or a REST catalog by configuration
(:class:`IcebergCatalogConfig`, secrets masked). The table is created on the first
batch and evolved through :mod:`thalweg_bytewax.catalog.iceberg` (new fields added with
their docs, ``int → long`` only with ``allow_widening``, anything else refused before a
row is written); its partition spec comes from ``partition_by``. With
``locators="absent"`` it takes rows without a source locator (a stock Bytewax source,
window results): at-least-once appends, effectively-once upserts by key.

See docs/connectors/iceberg.md for the guarantee table and the snapshot-summary keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Literal

from typing_extensions import override

from thalweg_bytewax._deps import require
from thalweg_bytewax.catalog.iceberg import PartitionField
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.runtime.epoch_sink import (
    EpochSinkState,
    LocatorMode,
    check_locator_mode,
    unlocated_guarantee,
)
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option
from thalweg_bytewax.typemap import IdentifierMode

from ._partition import _IcebergPartition
from ._shared_table import SharedTable
from ._stats import IcebergSinkStats
from ._summary import COMMIT_KEY, COVERAGE_PREFIX, decode_spans, encode_spans
from .config import (
    DEFAULT_COMMIT_RETRIES,
    DEFAULT_KEEP_SNAPSHOTS,
    DEFAULT_TARGET_FILE_BYTES,
    IcebergCatalogConfig,
    IcebergSinkConfig,
)

__all__ = [
    "COMMIT_KEY",
    "COVERAGE_PREFIX",
    "IcebergCatalogConfig",
    "IcebergSink",
    "IcebergSinkStats",
    "PartitionField",
    "decode_spans",
    "encode_spans",
]

logger = logging.getLogger(__name__)


class IcebergSink(ShardedEpochSink[_IcebergPartition]):
    """Write keyed batches into one Iceberg table, one commit per epoch per shard.

    Source topic-partitions are the unit of ownership; ``shards`` sink partitions (one
    by default) commit to the table. Exactly-once via coverage: every epoch's commit
    stores, in its snapshot summary, the covered offsets of each source partition it
    touched; on resume they are read back and replayed rows are skipped (and checked by
    record id against the table). Rows without a locator are refused unless the sink is
    built with ``locators="absent"``.

    **Rows without a locator** (``locators="absent"``: rows from a stock Bytewax source
    through ``twg.to_batches``, window results of ``twg.window_agg``): no offsets, so no
    replay can be skipped. Each epoch is still one commit at the snapshot, but a crash
    after that commit and before Bytewax's recovery snapshot replays the epoch: in
    ``"append"`` mode its rows are appended again (**at-least-once**); in ``"upsert"``
    mode the replay overwrites the same keys (**effectively-once**: each key once, with
    its last value). The sink logs which of the two applies once at start. Key the stream
    by the upsert key (window results are keyed by their group key) so the rows of one key
    reach one shard in order.

    ``mode="append"`` appends; rows accumulate as data files during the epoch (encoded
    on a worker thread, a row group per ``row_group_bytes``, for an unpartitioned
    table) and become visible in one ``fast_append`` commit at the epoch's snapshot.
    ``mode="upsert"`` upserts the epoch's rows by ``key_columns`` (the last row of a key
    in an epoch wins) in one transaction; it holds an epoch's rows in memory.

    Example::

        flow = Dataflow("orders")
        orders = ...  # keyed batches with the locator columns
        op.output("iceberg", orders, IcebergSink("lake/warehouse", "shop.orders",
                                                 partition_by=["day(created_at)"]))

    The keywords other than ``coverage_store`` build an
    :class:`~thalweg_bytewax.connectors.iceberg.IcebergSinkConfig` (:attr:`config`), the
    model a pipeline's ``[sinks.<name>]`` table with ``kind = "iceberg"`` builds too; the
    sink's partitions read only that model.

    Args:
        catalog: An :class:`IcebergCatalogConfig`, a mapping of its fields, or a local
            warehouse directory (SQL catalog on SQLite there).
        table: ``namespace.table`` (the namespace is created when absent).
        mode: ``"append"`` or ``"upsert"``.
        key_columns: The upsert key (required for ``"upsert"``).
        partition_by: Partition fields, e.g. ``["region", "day(ts)", "bucket(16, id)"]``.
        allow_widening: Widen a column losslessly (``int → long``) instead of refusing.
        comments: Column docs by name (over contract descriptions and the built-in
            ``_twg_`` docs).
        identifiers: ``"strict"`` column names (``[a-z_][a-z0-9_]*``) or ``"relaxed"``.
        shards: Sink partitions, each committing separately (concurrent commits to one
            table are retried); 1 gives exactly one commit per epoch.
        sink_id: The name coverage is stored under (default: the output's step id).
            Keep it stable for a table: a new id writes every record again.
        target_file_bytes: Arrow bytes written to one data file before the next one
            starts (512 MiB, pyiceberg's target file size: an epoch below it is one data
            file). A partitioned table buffers this much before writing its files.
        row_group_bytes: Arrow bytes of an unpartitioned ``"append"`` table encoded as
            one Parquet row group, on a worker thread while the epoch's batches still
            arrive (an encode that failed fails the next write or the snapshot). None:
            three quarters of the last epoch's bytes (at least 1 MiB), so an epoch is
            two row groups and its snapshot encodes only the last quarter.
        commit_retries: Retries of a commit that lost a race with another writer.
        keep_snapshots: Snapshots the table's history keeps (at least 64): once it holds
            more, an epoch commit expires the oldest in the same transaction, carrying
            the coverage only they held, so exactly once survives it. None never expires
            (the table's metadata then grows by about a kilobyte an epoch). The table's
            ``history.expire.min-snapshots-to-keep`` and ``history.expire.max-snapshot-
            age-ms`` properties keep more.
        metadata_prefix: Prefix of the metadata columns.
        coverage_store: Where to record each committed epoch's coverage (beside the
            raw lane, never in the table), under ``sink_id``: a
            :class:`~thalweg_bytewax.coverage.store.CoverageStore`, a path (SQLite) or a
            ``postgresql://`` URL. None records nothing. ``thalweg coverage`` reads it.
        locators: ``"required"`` (rows carry ``_twg_source_*`` locators: exactly once)
            or ``"absent"`` (rows without them: at-least-once appends, effectively-once
            upserts; the locator columns are then refused).
    """

    def __init__(  # noqa: PLR0913 - one documented knob each
        self,
        catalog: IcebergCatalogConfig | Mapping[str, object] | str | os.PathLike[str],
        table: str,
        *,
        mode: Literal["append", "upsert"] = "append",
        key_columns: Sequence[str] = (),
        partition_by: Sequence[str | PartitionField] = (),
        allow_widening: bool = False,
        comments: Mapping[str, str] | None = None,
        identifiers: IdentifierMode = "strict",
        shards: int = 1,
        sink_id: str | None = None,
        target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
        row_group_bytes: int | None = None,
        commit_retries: int = DEFAULT_COMMIT_RETRIES,
        keep_snapshots: int | None = DEFAULT_KEEP_SNAPSHOTS,
        metadata_prefix: str = DEFAULT_PREFIX,
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
        locators: LocatorMode = "required",
    ) -> None:
        require("pyiceberg", extra="iceberg")
        check_locator_mode("iceberg sink", locators)
        if locators == "absent" and coverage_store is not None:
            msg = (
                "iceberg sink: `coverage_store` records source offsets; expected none with "
                "locators='absent' (rows without a locator cover no offsets); got one; drop "
                "`coverage_store`, or give the rows a locator"
            )
            raise ConfigError(msg)
        keys = (key_columns,) if isinstance(key_columns, str) else tuple(key_columns)
        self.config = IcebergSinkConfig.build(
            {
                "catalog": IcebergCatalogConfig.of(catalog),
                "table": table,
                "mode": mode,
                "key_columns": keys,
                "partition_by": tuple(partition_by),
                "allow_widening": allow_widening,
                "comments": dict(comments or {}),
                "identifiers": identifiers,
                "shards": shards,
                "sink_id": sink_id,
                "target_file_bytes": target_file_bytes,
                "row_group_bytes": row_group_bytes,
                "commit_retries": commit_retries,
                "keep_snapshots": keep_snapshots,
                "metadata_prefix": metadata_prefix,
                "locators": locators,
            }
        )
        self.shards = self.config.shards
        self.columns = self.config.columns
        self.coverage_store = coverage_store_option(coverage_store)
        self._announced = False
        # The catalog and table this process's shards share (one commit at a time).
        self._shared = SharedTable(self.config.catalog, self.config.table)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"IcebergSink({c.catalog.describe()}, table={c.table!r}, mode={c.mode!r}, "
            f"shards={c.shards})"
        )

    @override
    def coverage_sink_id(self, step_id: str) -> str:
        return self.config.sink_id or step_id

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _IcebergPartition:
        sink_id = self.coverage_sink_id(step_id)
        if not self._announced:
            self._announced = True
            c = self.config
            if c.locators == "absent":
                text = unlocated_guarantee(
                    f"iceberg sink: table `{c.table}` in the {c.catalog.describe()}",
                    c.mode,
                    c.key_columns,
                )
                logger.log(logging.INFO if c.mode == "upsert" else logging.WARNING, "%s", text)
            else:
                logger.info(
                    "iceberg sink: writing table `%s` in the %s, mode %s, coverage under `%s%s/`",
                    c.table,
                    c.catalog.describe(),
                    c.mode,
                    COVERAGE_PREFIX,
                    sink_id,
                )
        return _IcebergPartition(self.config, sink_id, resume_state, shard, self._shared)
