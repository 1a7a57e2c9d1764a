"""The settings of an Iceberg sink: ``IcebergSinkConfig`` and its ``IcebergCatalogConfig``.

``IcebergCatalogConfig`` lives in a module of its own (``_catalog_config``) and is
imported from here.

:class:`~thalweg_bytewax.connectors.iceberg.IcebergSink` builds :class:`IcebergSinkConfig`
from its keywords, a pipeline builds it from a ``[sinks.<name>]`` table with
``kind = "iceberg"``, and the sink's partitions read only it. A ``coverage_store`` object
is an argument of the sink, not a setting.

Catalog properties are pyiceberg's string properties (``uri``, ``warehouse``, ``token``,
``s3.secret-access-key``, …). Secrets live in :class:`~pydantic.SecretStr` fields or in
``secret_properties`` and never reach a message, a repr or a log line; a property whose
key names a secret is refused in the plain ``properties`` map.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from thalweg_bytewax.catalog.iceberg import PartitionField, parse_partition_spec
from thalweg_bytewax.config import ConnectorConfig
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.typemap import validate_identifier

from .._settings import MetadataPrefix
from ._catalog_config import IcebergCatalogConfig
from ._history import MIN_KEEP_SNAPSHOTS

__all__ = [
    "DEFAULT_COMMIT_RETRIES",
    "DEFAULT_KEEP_SNAPSHOTS",
    "DEFAULT_TARGET_FILE_BYTES",
    "MIN_KEEP_SNAPSHOTS",
    "MIN_ROW_GROUP_BYTES",
    "ROW_GROUP_SHARE",
    "IcebergCatalogConfig",
    "IcebergSinkConfig",
]

# Arrow bytes that go into one data file before the next one starts. pyiceberg's own
# target file size (`write.target-file-size-bytes`, 512 MiB), so an epoch of up to ~4M
# narrow rows is one data file as a bare `table.append` writes it; 64 MiB wrote three
# files an epoch of 1M rows and ran at 0.8x the bare append (docs/benchmarks.md).
DEFAULT_TARGET_FILE_BYTES = 512 * 1024 * 1024
# Without `row_group_bytes`, an unpartitioned append table's epoch goes to the worker
# thread as two row groups: the rows up to this share of the last epoch's Arrow bytes,
# encoded while the epoch's batches still arrive, then the rest at the snapshot. Two,
# not more: each row group of a column whose values overflow its dictionary page
# (ids, offsets, amounts) dictionary-encodes its first values again before falling
# back: cut into four row groups, a 1M-row epoch cost 1.7x the encode's CPU and 1.3x
# the file size of one; into two, 1.2x and 1.1x (docs/benchmarks/iceberg-sink.md).
ROW_GROUP_SHARE = 0.75
# An epoch smaller than this is one row group, encoded at the snapshot.
MIN_ROW_GROUP_BYTES = 1024 * 1024
# Commits lost to concurrent writers are retried on the refreshed table this many times.
DEFAULT_COMMIT_RETRIES = 8
# Snapshots a table's history keeps (an epoch commit expires the older ones): ~17
# minutes of 10 s epochs to travel back through, as many as the metadata files Iceberg
# keeps by default. Over 3,000 epochs a commit cost 17 ms of CPU at the end with 100
# kept, 35 ms with 500 and 259 ms with all (docs/benchmarks/iceberg-history.md).
DEFAULT_KEEP_SNAPSHOTS = 100


class IcebergSinkConfig(ConnectorConfig):
    """The settings of an :class:`~thalweg_bytewax.connectors.iceberg.IcebergSink`.

    Example:
        >>> cfg = IcebergSinkConfig.build(
        ...     {"catalog": IcebergCatalogConfig(warehouse="lake"), "table": "shop.orders",
        ...      "partition_by": ("day(created_at)",)}
        ... )
        >>> cfg.partition_by[0].transform, cfg.shards
        ('day', 1)
    """

    component: ClassVar[str] = "iceberg sink"

    catalog: IcebergCatalogConfig
    """Where the catalog lives (a SQL catalog on SQLite under a warehouse by default, or
    REST); its secrets are masked."""
    table: str
    """`namespace.table` (the namespace is created when absent)."""
    mode: Literal["append", "upsert"] = "append"
    """`append` appends; `upsert` replaces rows by `key_columns` (one shard)."""
    key_columns: tuple[str, ...] = ()
    """The upsert key (required for `upsert`)."""
    partition_by: tuple[PartitionField, ...] = ()
    """Partition fields, e.g. `["region", "day(ts)", "bucket(16, id)"]`."""
    allow_widening: bool = False
    """Widen a column losslessly (`int` to `long`) instead of refusing."""
    comments: dict[str, str] = Field(default_factory=dict)
    """Column docs by name (over contract descriptions and the built-in `_twg_` docs)."""
    identifiers: Literal["strict", "relaxed"] = "strict"
    """`strict` column names (`[a-z_][a-z0-9_]*`) or `relaxed`."""
    shards: int = Field(default=1, ge=1)
    """Sink partitions, each committing separately; 1 gives one commit per epoch."""
    sink_id: str | None = None
    """The name coverage is stored under (default: the output's step id); keep it stable
    for a table."""
    target_file_bytes: int = Field(default=DEFAULT_TARGET_FILE_BYTES, ge=1)
    """Arrow bytes written to one data file before the next one starts (a partitioned
    table buffers this much before writing its files)."""
    row_group_bytes: int | None = Field(default=None, ge=1)
    """Arrow bytes of an unpartitioned append table encoded as one Parquet row group on
    a worker thread while the epoch's batches still arrive; unset: three quarters of the
    last epoch's, so an epoch is two row groups and the snapshot encodes the last."""
    commit_retries: int = Field(default=DEFAULT_COMMIT_RETRIES, ge=0)
    """Retries of a commit that lost a race with another writer."""
    keep_snapshots: int | None = Field(default=DEFAULT_KEEP_SNAPSHOTS, ge=MIN_KEEP_SNAPSHOTS)
    """Snapshots the table's history keeps: an epoch commit expires older ones, carrying
    their coverage (`"all"` or None: never expire; the table's `history.expire.*` raise
    it)."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
    locators: Literal["required", "absent"] = "required"
    """`required` (rows carry `_twg_source_*` locators: exactly once) or `absent`."""

    @field_validator("keep_snapshots", mode="before")
    @classmethod
    def _keep_all(cls, value: Any) -> Any:
        # TOML has no null: `keep_snapshots = "all"` spells "never expire".
        return None if isinstance(value, str) and value.strip().lower() == "all" else value

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog(cls, value: Any) -> Any:
        if isinstance(value, str | os.PathLike):
            return {"warehouse": os.fspath(value)}
        return value

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) < 2:  # noqa: PLR2004 - namespace and name
            msg = f"expected `namespace.table`; got {value!r}"
            raise ValueError(msg)
        for part in parts:
            validate_identifier(
                part, mode="strict", what="table", target="iceberg", relaxable=False
            )
        return value

    @field_validator("partition_by", mode="before")
    @classmethod
    def _spec(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and any(isinstance(v, str) for v in value):
            return parse_partition_spec(list(value))
        return value

    @field_validator("sink_id")
    @classmethod
    def _sink_id(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value):
            msg = f"expected a non-empty name without `/`; got {value!r}"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _by_mode(self) -> IcebergSinkConfig:
        for key in self.key_columns:
            validate_identifier(key, mode=self.identifiers, what="key column", target="iceberg")
        if self.mode == "upsert" and not self.key_columns:
            msg = (
                f"table `{self.table}` in mode 'upsert' needs `key_columns`; expected the "
                f"columns that identify a row; got none; name them, or use mode='append'"
            )
            raise ValueError(msg)
        if self.mode == "upsert" and self.shards > 1:
            # Two shards upserting one key concurrently can both commit: pyiceberg's
            # conflict check judges data files, not rows, so the table ends with the key
            # twice and no error. One writer per table keeps upserts exact.
            msg = (
                f"table `{self.table}` in mode 'upsert' expected shards=1; got "
                f"shards={self.shards}; concurrent upserts of one key from two shards can "
                f"leave the key twice, so an upserting table has one writer (use shards=1)"
            )
            raise ValueError(msg)
        return self

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)
