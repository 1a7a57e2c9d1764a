"""Private: the table a PostgreSQL sink writes, shared by its partitions on a process.

:class:`PostgresTable` holds what every partition of one sink shares: the settings
(:class:`~thalweg_bytewax.connectors.postgres.PostgresSinkConfig`), the bookkeeping made
once (schema, coverage table, what the table held at start), the table's shape per
incoming schema (provisioned once), and the connections and reads the partitions ask
for. Control (describe, create, evolve, comment) runs on psycopg through
:mod:`thalweg_bytewax.catalog.postgres`; the epoch's rows go through ADBC.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from psycopg import sql

from thalweg_bytewax import _deps
from thalweg_bytewax.catalog import TableShape
from thalweg_bytewax.catalog import postgres as pgcat
from thalweg_bytewax.catalog.reconcile import reconcile
from thalweg_bytewax.coverage.spans import replacement_verdicts
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.metadata import MetadataPolicy

from . import _coverage as cov
from ._deadline import tcp_bounds, with_tcp_bounds
from ._errors import describe_error, is_transient
from .config import PostgresSinkConfig

__all__ = ["PostgresTable", "TargetState"]

_adbc = _deps.require("adbc_driver_postgresql.dbapi", extra="postgres")

logger = logging.getLogger("thalweg_bytewax.connectors.postgres.sink")

TargetState = Literal["missing", "empty", "rows"]
"""What the sink found of its table at start."""


class PostgresTable:
    """The table of one PostgreSQL sink: bookkeeping, provisioning, connections, reads.

    Args:
        config: The sink's settings.
        comments: Column descriptions (from the contract) written as comments.
        key_columns: The upsert key as resolved (the keywords', else the contract's
            primary key; empty in append mode).
    """

    def __init__(
        self,
        config: PostgresSinkConfig,
        *,
        comments: dict[str, str],
        key_columns: tuple[str, ...],
    ) -> None:
        self.config = config
        self.schema = config.db_schema
        self.table = config.table
        self.target = config.target
        self.mode = config.mode
        self.columns = config.columns
        self.metadata = MetadataPolicy(config.metadata)
        self.comments = comments
        self.key_columns = key_columns
        self.sink_name = config.sink_name if config.sink_name is not None else self.target
        self._lock = threading.Lock()
        self._shapes: dict[pa.Schema, TableShape] = {}
        self._bookkeeping_ready = False
        self._target_at_start: TargetState = "rows"
        self._start_columns: frozenset[str] = frozenset()

    @property
    def dsn(self) -> str:
        """The connection URI, resolved here, where it is used (never put it in a message)."""
        return self.config.dsn.resolve()

    def _bounded_dsn(self) -> str:
        """The DSN with the connect timeout and TCP keepalives it does not set itself."""
        config = self.config
        return with_tcp_bounds(self.dsn, tcp_bounds(config.network_timeout, config.connect_timeout))

    def connect_control(self) -> Any:
        """A new psycopg connection (autocommit off) for describe, DDL and reads."""
        try:
            timeout = self.config.connect_timeout.total_seconds()
            return pgcat.connect(self._bounded_dsn(), connect_timeout_s=timeout)
        except Exception as exc:  # psycopg.Error, classified by SQLSTATE
            raise self._connect_error(exc) from None

    def connect_data(self) -> Any:
        """A new ADBC connection (autocommit off) for the epoch's transaction."""
        return _adbc.connect(self._bounded_dsn())

    def _connect_error(self, exc: Exception) -> Exception:
        detail = describe_error(exc, self.dsn)
        if is_transient(exc):
            msg = (
                f"postgres sink `{self.target}`: cannot connect ({detail}); retry when the "
                f"server is up"
            )
            return SinkTransientError(msg)
        msg = (
            f"postgres sink `{self.target}`: cannot connect ({detail}); check the DSN and the role"
        )
        return SinkTerminalError(msg)

    def ensure_bookkeeping(self) -> None:
        """Create the schema and its coverage table once per sink and process."""
        with self._lock:
            if self._bookkeeping_ready:
                return
            with self.connect_control() as conn:
                # Processes starting at once would race on `CREATE ... IF NOT EXISTS`
                # (a unique violation in PostgreSQL's catalog): one creates, the rest wait.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"thalweg bookkeeping {self.schema}",),
                )
                pgcat.ensure_schema(conn, self.schema)
                conn.execute(cov.create_coverage_sql(self.schema))
                conn.commit()
                self._target_at_start = self._target_state(conn)
            self._bookkeeping_ready = True

    def _target_state(self, conn: Any) -> TargetState:
        """Whether the table is missing, empty or holds rows (two cheap reads), and its columns."""
        shape = pgcat.describe(conn, self.schema, self.table)
        if shape is None:
            conn.rollback()
            return "missing"
        self._start_columns = frozenset(c.name for c in shape.columns)
        row = conn.execute(
            sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(
                sql.Identifier(self.schema, self.table)
            )
        ).fetchone()
        conn.rollback()
        return "rows" if row and row[0] else "empty"

    @property
    def target_at_start(self) -> TargetState:
        """What the sink found of its table at start: ``missing``, ``empty`` or ``rows``."""
        self.ensure_bookkeeping()
        return self._target_at_start

    def partition_check_sql(self) -> str | None:
        """The query whether the table holds a row of a source partition (``$1``, ``$2``).

        Asked once per covered partition at start, through the shard's data
        connection: in ``append`` mode every covered partition left a row, so an
        ``EXISTS`` by its locator (stopping at the first row) tells whether the table
        lost it. None in ``upsert`` mode (a key may have replaced all of a partition's
        rows) or without the locator columns: then only the table as a whole is judged.
        """
        cols = self.columns
        if self.mode != "append" or not {cols.source_topic, cols.source_partition} <= (
            self._start_columns
        ):
            return None
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {} = $1 AND {} = $2)").format(
            sql.Identifier(self.schema, self.table),
            sql.Identifier(cols.source_topic),
            sql.Identifier(cols.source_partition),
        )
        return query.as_string(None)

    def forget_coverage(self, topic: str, partition: int) -> None:
        """Delete the coverage row of a source partition the table no longer holds."""
        with self.connect_control() as conn:
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE sink = %s AND topic = %s AND partition = %s").format(
                    sql.Identifier(self.schema, cov.COVERAGE_TABLE)
                ),
                (self.sink_name, topic, partition),
            )
            conn.commit()

    def held_record_ids(self, topic: str, partition: int, first: int, last: int) -> pa.Table | None:
        """The ``(offset, record id)`` pairs the table holds for a source range, if it can."""
        cols = self.columns
        if not self._has_columns(
            (cols.source_topic, cols.source_partition, cols.source_offset, cols.record_id)
        ):
            return None
        with self.connect_control() as conn:
            rows = pgcat.select_record_ids(
                conn, self.schema, self.table, cols, topic, partition, first, last
            )
        return rows

    def replaced_by_key(
        self, topic: str, partition: int, rows: pa.RecordBatch
    ) -> np.ndarray | None:
        """Per row of ``rows``, whether the table holds a later row of the row's key.

        ``rows`` come from one source partition; the answer is
        :func:`~thalweg_bytewax.coverage.replacement_verdicts`'. None without the key or
        locator columns to compare, or for key values the statement cannot carry.
        """
        cols = self.columns
        keys = list(self.key_columns)
        locator = (cols.source_topic, cols.source_partition, cols.source_offset)
        if not keys or not set(keys).issubset(rows.schema.names):
            return None
        if not self._has_columns((*keys, *locator)):
            return None
        values = list(zip(*(rows.column(k).to_pylist() for k in keys), strict=True))
        with self.connect_control() as conn:
            try:
                found = pgcat.select_key_locators(conn, self.schema, self.table, cols, keys, values)
            except pgcat.KEY_LOOKUP_ERRORS:
                logger.debug("postgres sink: key lookup of %s failed", self.target, exc_info=True)
                return None  # a key the statement cannot carry: such rows are warned about
        offsets = rows.column(cols.source_offset)
        return replacement_verdicts(offsets, found.column("_row"), found, cols, topic, partition)

    def _has_columns(self, names: Sequence[str]) -> bool:
        """Whether the table (as last provisioned, else as described now) has ``names``."""
        with self._lock:
            shape = next(iter(self._shapes.values()), None)
        if shape is None:
            with self.connect_control() as conn:
                shape = pgcat.describe(conn, self.schema, self.table)
        return shape is not None and all(shape.column(n) is not None for n in names)

    def written_columns(self, schema: pa.Schema) -> list[str]:
        """The columns of a prepared batch that go into the table, in batch order."""
        return list(schema.names)

    def prepare(self, rows: pa.RecordBatch) -> pa.Table:
        """Provision the table for this batch's schema once, and cast the rows to it."""
        cols = self.columns
        keep = set(cols.policy_columns(self.metadata))
        names = [n for n in rows.schema.names if n not in cols.names or n in keep]
        batch = rows.select(names)
        key = batch.schema
        with self._lock:
            shape = self._shapes.get(key)
            if shape is None:
                shape = self._sync(batch.schema)
                self._shapes[key] = shape
        # Nested values become JSON text for `jsonb` columns, zone mismatches are refused.
        fitted = reconcile(batch, shape, target="postgres", table=self.target)
        return pgcat.cast_to_shape(pa.Table.from_batches([fitted]), shape, self.target)

    def _sync(self, desired: pa.Schema) -> TableShape:
        with self.connect_control() as conn:
            shape = pgcat.sync(
                conn,
                self.schema,
                self.table,
                desired,
                comments=self.comments,
                allow_widening=self.config.allow_widening,
                conversions=self.config.conversions,
                identifiers=self.config.identifiers,
                primary_key=self.key_columns,
                metadata_prefix=self.columns.prefix,
                fingerprint=_fingerprint(self, desired),
            )
        logger.info(
            "postgres sink `%s`: table holds %s columns for the incoming schema",
            self.target,
            len(shape.columns),
        )
        return shape


def _fingerprint(sink: PostgresTable, desired: pa.Schema) -> str:
    """What a provisioning depends on, hashed (the stored hash of an idempotent re-sync)."""
    parts = [
        desired.to_string(show_field_metadata=True, show_schema_metadata=False),
        repr(sorted(sink.comments.items())),
        repr(sorted(sink.config.conversions.items())),
        repr(sink.config.allow_widening),
        repr(sink.key_columns),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
