"""Private: the sink partition behind ``IcebergSink`` — stage data files, commit per epoch.

The epoch protocol (failed flag, ownership, ordering, replay skipping and record-id
checks, never publishing in ``close()``) is :class:`~thalweg_bytewax.runtime.epoch_sink.
EpochSinkPartition`'s. This module:

* provisions the table when a batch brings a schema it has not seen (through
  :func:`thalweg_bytewax.catalog.iceberg.provision`: create, add columns with docs,
  widen by opt-in, refuse the rest before anything is written) and casts each batch to
  the table's column types at the write boundary;
* in ``append`` mode writes Parquet data files as rows accumulate (never visible until
  committed): for an unpartitioned table on a worker thread, a row group per
  ``row_group_bytes`` chunk, while the epoch's batches still arrive (:mod:`._write_behind`);
  for a partitioned one ``target_file_bytes`` at a time, through pyiceberg's
  ``table.append`` path. At the epoch's snapshot it appends them all in **one** Iceberg
  commit
  whose snapshot summary carries the covered offsets of every source partition it
  touched (``thalweg.coverage.<sink id>/<topic>:<partition>`` → ``"0-99,150-199"``);
* in ``upsert`` mode keeps the epoch's rows, deduplicated by key (last wins), and
  upserts them in one transaction carrying the same coverage properties (what an epoch
  stages until its commit is :mod:`._staging`'s);
* on resume reads the coverage back as the union over the current snapshot's ancestry;
* with ``locators="absent"`` stages rows without a locator (key ``UNLOCATED``) the same
  way, in commits without coverage properties.

A commit that loses a race (``CommitFailedException``: another shard or process
committed first; for an upsert also pyiceberg's ``ValidationException``, when files
another writer added may hold its keys) is retried on the refreshed table with the
same data files (an upsert matched again), a bounded number of times, then fails the
epoch with :class:`SinkTerminalError` naming the table.
A retry first checks whether the commit landed after all (each epoch's commit carries a
unique ``thalweg.commit`` id), so an ambiguous failure never appends twice.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pyarrow as pa
from typing_extensions import override

from thalweg_bytewax import _faults
from thalweg_bytewax._deps import require

require("pyiceberg", extra="iceberg")

# The write path pyiceberg's own `Table.append` uses: data files first, then a commit
# that can be retried with the same files after a lost race.
from pyiceberg.io.pyarrow import _dataframe_to_data_files  # noqa: E402 - after the install hint

from thalweg_bytewax.catalog.iceberg import describe, provision  # noqa: E402
from thalweg_bytewax.catalog.reconcile import reconcile  # noqa: E402
from thalweg_bytewax.catalog.steps import TableShape  # noqa: E402
from thalweg_bytewax.coverage.spans import OffsetCoverage  # noqa: E402
from thalweg_bytewax.errors import ConfigError, SinkTerminalError  # noqa: E402
from thalweg_bytewax.runtime.epoch_sink import UNLOCATED, EpochSinkState  # noqa: E402

from .._epoch_partition import TABLE_UNLOCATED_REMEDY, ConfiguredSinkPartition  # noqa: E402
from ._commit import commit  # noqa: E402
from ._reads import held_record_ids, holds_partition, replaced_by_key  # noqa: E402
from ._shared_table import SharedTable  # noqa: E402
from ._staging import EpochStage, last_per_key  # noqa: E402
from ._stats import IcebergSinkStats  # noqa: E402
from ._summary import (  # noqa: E402
    COMMIT_KEY,
    COVERAGE_PREFIX,
    RESET_PREFIX,
    decode_spans,
    encode_spans,
    read_coverage,
)
from ._write_behind import WriteBehind, writes_behind  # noqa: E402
from .config import MIN_ROW_GROUP_BYTES, ROW_GROUP_SHARE  # noqa: E402

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from .config import IcebergSinkConfig

__all__ = [
    "COMMIT_KEY",
    "COVERAGE_PREFIX",
    "RESET_PREFIX",
    "IcebergSinkStats",
    "decode_spans",
    "encode_spans",
]

logger = logging.getLogger(__name__)


class _IcebergPartition(ConfiguredSinkPartition["IcebergSinkConfig"]):
    replay_remedy: ClassVar[str] = "write to a new table, or give the sink a new `sink_id`"
    merge_remedy: ClassVar[str] = "give each stream its own table"
    unlocated_remedy: ClassVar[str] = TABLE_UNLOCATED_REMEDY

    def __init__(
        self,
        config: IcebergSinkConfig,
        sink_id: str,
        resume: EpochSinkState | None,
        shard: int,
        shared: SharedTable,
    ) -> None:
        self.stats: IcebergSinkStats = IcebergSinkStats()
        super().__init__(
            "iceberg sink", config, resume, shard, stats=self.stats, locators=config.locators
        )
        self.target_replaces_rows = config.mode == "upsert"
        self._sink_id = sink_id
        self._shared = shared  # the catalog and table, shared with this process's shards
        shared.catalog  # noqa: B018 - opened now: a catalog that cannot open fails the build
        self._held: dict[str, OffsetCoverage] | None = None
        self._schema: pa.Schema | None = None  # the last batch schema provisioned
        self._shape: TableShape | None = None  # the table's columns batches are cast to
        self._staged = EpochStage()
        self._behind = WriteBehind(config.table)  # an unpartitioned append's encoder
        self._epoch_bytes = 0  # Arrow bytes handed to the encoder this epoch
        self._last_epoch_bytes = 0  # and in the last epoch committed
        # Source partitions the table lost: the next commit of each marks the reset.
        self._reset: set[str] = set()
        # Whether another writer's snapshot in the ancestry removed rows (read with the
        # coverage): only then are covered partitions looked up one by one at start.
        self._foreign_deletes = False
        # Per source partition, the last read for key lookups: (first offset, rows).
        self._key_windows: dict[str, tuple[int, pa.Table]] = {}

    # -- hooks of the epoch protocol -------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        if self._held is None:
            self._held = self._read_coverage()
        held = self._held.get(key, OffsetCoverage())
        resumed = self.resumed_offset(key)
        if self._current_table() is None:
            if resumed:
                # The sink committed rows of `key` before the resumed epoch, so the table
                # existed: it was dropped, and the source resumes past what it held.
                self._refuse_lost(key, f"offsets below {resumed}", resumed)
            # No table, no coverage: whatever the coverage store holds of this sink's
            # partition describes a dropped table (nothing, for a new one).
            self.target_lost([key])
        if held and not self._holds(topic, partition):
            if resumed:
                self._refuse_lost(key, f"offsets {held.first}-{held.last}", resumed)
            logger.warning(
                "iceberg sink: table `%s` holds no row of `%s` (rows deleted) while its "
                "snapshots' coverage claimed offsets %s-%s (%s offsets); that coverage is "
                "dropped and the table is refilled with what the source replays",
                self._config.table,
                key,
                held.first,
                held.last,
                f"{held.size:,}",
            )
            self._reset.add(key)
            self.target_lost([key])
            return OffsetCoverage()
        return held

    def _holds(self, topic: str, partition: int) -> bool:
        """Whether the table still holds a row of source partition ``topic:partition``."""
        table = self._current_table()
        if table is None:
            return False
        mode = self._config.mode
        return holds_partition(table, self.columns, mode, self._foreign_deletes, topic, partition)

    def _refuse_lost(self, key: str, what: str, resumed: int) -> None:
        msg = (
            f"iceberg sink: table `{self._config.table}` holds no row of `{key}` (the table "
            f"was dropped or its rows deleted), but the flow resumes `{key}` at offset "
            f"{resumed} and the sink's coverage claims {what}: the source will not replay "
            f"them, so nothing would refill the table. Nothing was written. To refill it, "
            f"start the flow without its recovery state (a fresh recovery directory) so "
            f"the source replays from its start: the sink then drops the stale coverage "
            f"and writes the rows again; or {self.replay_remedy}"
        )
        raise SinkTerminalError(msg)

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        if key == UNLOCATED:
            self._staged.unlocated = True
        else:
            self._staged.offsets(key, rows.column(self.columns.source_offset))
        self._staged.add(self._conform(rows))
        if self._config.mode == "append" and self._staged.full(self._chunk_bytes()):
            self._write_files()

    @override
    def commit_epoch(self) -> None:
        if not self._staged:
            return  # nothing staged: no empty snapshot
        if self._config.mode == "append":
            self._write_files()
            files = self._behind.finish()  # a failed encode raises here: nothing commits
            self._staged.files.extend(files)
            self.stats.data_files_written += len(files)
            self._last_epoch_bytes, self._epoch_bytes = self._epoch_bytes, 0
            rows = None
        else:
            rows = last_per_key(self._staged.batches, list(self._config.key_columns))
        _faults.checkpoint("iceberg.before_commit")
        self._commit(rows, self._properties())
        _faults.checkpoint("iceberg.after_commit")
        self._reset -= self._staged.pending.keys()
        self._staged.clear()
        self._key_windows.clear()  # a replay rarely outlasts an epoch: its reads go

    @override
    def abort(self) -> None:
        # Data files written this epoch are never committed: orphans no snapshot
        # references, removed by the table's orphan-file maintenance.
        self._behind.discard()
        self._staged.clear()
        self._epoch_bytes = 0

    @override
    def release(self) -> None:
        self._behind.shutdown()

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        table = self._current_table()
        if table is None:
            return None
        return held_record_ids(table, self.columns, key, first, last)

    @override
    def replaced_by_key(self, key: str, rows: pa.RecordBatch) -> np.ndarray | None:
        table = self._current_table()
        if table is None:
            return None
        keys = list(self._config.key_columns)
        return replaced_by_key(table, keys, self.columns, key, rows, self._key_windows)

    @override
    def describe_target(self, key: str) -> str:
        return f"table `{self._config.table}`"

    # -- tables and schemas ----------------------------------------------------------

    @property
    def _table(self) -> Table | None:
        """The table as this process last loaded or committed it (shared by its shards)."""
        return self._shared.table

    def _current_table(self) -> Table | None:
        return self._shared.current()

    def _read_coverage(self) -> dict[str, OffsetCoverage]:
        """The coverage of every source partition, united over the snapshot ancestry.

        Read from the table as the catalog holds it now, once a partition.
        """
        held, foreign_deletes = read_coverage(self._shared.reload(), self._sink_id)
        self._foreign_deletes = self._foreign_deletes or foreign_deletes
        return held

    def _conform(self, rows: pa.RecordBatch) -> pa.RecordBatch:
        """Provision the table for a new schema, then reconcile rows to its columns."""
        if self._schema is None or not rows.schema.equals(self._schema):
            self._write_files()  # files of the old schema stay valid after evolution
            self._behind.roll()  # the next chunk starts a file of the new schema
            self._provision(rows.schema)
        shape = self._shape
        if shape is None:  # pragma: no cover - set by _provision
            msg = f"iceberg sink: table `{self._config.table}` was not provisioned"
            raise SinkTerminalError(msg)
        return reconcile(rows, shape, target="iceberg", table=self._config.table)

    def _provision(self, schema: pa.Schema) -> None:
        sink = self._config
        if sink.mode == "upsert":
            absent = [k for k in sink.key_columns if k not in schema.names]
            if absent:
                msg = (
                    f"iceberg sink: table `{sink.table}` upserts by {list(sink.key_columns)}; "
                    f"expected every key column in the batch; got none named {absent}; keep "
                    f"the key columns upstream"
                )
                raise ConfigError(msg)
        with self._shared.lock:
            table, _ = provision(
                self._shared.catalog,
                sink.table,
                schema,
                comments=sink.comments,
                allow_widening=sink.allow_widening,
                partition_by=sink.partition_by,
                identifiers=sink.identifiers,
                metadata_prefix=self.columns.prefix,
            )
            self._shared.table = table
            self._shared.check_properties()
        self._shape = describe(table)
        self._schema = schema

    # -- data files and commits ------------------------------------------------------

    def _chunk_bytes(self) -> int:
        """Arrow bytes buffered before they are handed to data files.

        For the worker thread: ``row_group_bytes``, or three quarters of the last
        epoch's bytes (the whole epoch at its snapshot for the first one); else, and
        at most, ``target_file_bytes``.
        """
        config = self._config
        target = config.target_file_bytes
        if self._table is None or not writes_behind(self._table.metadata):
            return target
        if config.row_group_bytes is not None:
            return min(config.row_group_bytes, target)
        if not self._last_epoch_bytes:
            return target
        share = int(self._last_epoch_bytes * ROW_GROUP_SHARE)
        return min(max(share, MIN_ROW_GROUP_BYTES), target)

    def _write_files(self) -> None:
        """Write the buffered rows as data files (invisible until the epoch commits).

        An unpartitioned table's rows go to the worker thread as the next row group of
        the open file; a partitioned table's are written here, one file per partition.
        """
        if not self._staged.batches or self._config.mode != "append":
            return
        table = self._table
        if table is None:  # pragma: no cover - provisioned before anything is buffered
            msg = f"iceberg sink: table `{self._config.table}` was not provisioned"
            raise SinkTerminalError(msg)
        nbytes = self._staged.nbytes
        data = pa.Table.from_batches(self._staged.take_batches())
        if writes_behind(table.metadata):
            target = self._config.target_file_bytes
            self._behind.submit(table.metadata, table.io, data, nbytes, target)
            self._epoch_bytes += nbytes
            return
        files = list(_dataframe_to_data_files(table.metadata, data, table.io))
        self._staged.files.extend(files)
        self.stats.data_files_written += len(files)

    def _properties(self) -> dict[str, str]:
        props = {COMMIT_KEY: uuid.uuid4().hex}
        for key, staged in self._staged.pending.items():
            held = self.coverage(key) or OffsetCoverage()
            name = f"{COVERAGE_PREFIX}{self._sink_id}/{key}"
            props[name] = encode_spans(held.union(staged))
            if key in self._reset:
                props[f"{RESET_PREFIX}{self._sink_id}/{key}"] = "1"
        return props

    def _commit(self, rows: pa.Table | None, props: dict[str, str]) -> None:
        shared = self._shared
        with shared.committing():  # one commit at a time, from the table as last committed
            table = shared.table
            if table is None:  # pragma: no cover - provisioned before anything is staged
                msg = f"iceberg sink: table `{self._config.table}` was not provisioned"
                raise SinkTerminalError(msg)
            shared.table = commit(table, self._config, rows, props, self._staged.files, self.stats)
