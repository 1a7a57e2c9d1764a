"""PostgreSQL output: a table provisioned from the batches, every record exactly once.

Topic-partitions are the unit of parallelism. Exactly-once via coverage; replays are
skipped. Within an epoch a partition buffers its rows as Arrow (cast to the table's
types); when Bytewax closes the epoch, ``snapshot()`` writes them in one transaction:
the rows (a binary ``COPY`` through the ADBC PostgreSQL driver, the fastest path
measured, docs/benchmarks.md "PostgreSQL sink") and the coverage rows of their source
partitions in ``<schema>._twg_coverage``, then ``COMMIT``. On resume each partition
reads its coverage row and skips replayed offsets the table already holds. With
``locators="absent"`` it takes rows without a source locator (a stock Bytewax source,
window results): at-least-once appends, effectively-once upserts by key.

Control (describe, create, evolve, comment) runs on psycopg through
:mod:`thalweg_bytewax.catalog.postgres`; see docs/connectors/postgres.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from psycopg import sql
from typing_extensions import override

from thalweg_bytewax import _deps
from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.catalog import TableShape
from thalweg_bytewax.catalog import postgres as pgcat
from thalweg_bytewax.catalog.reconcile import reconcile
from thalweg_bytewax.contracts.spec import ContractSpec, ObjectSpec
from thalweg_bytewax.coverage.spans import replacement_verdicts
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, SinkTransientError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataPolicy, metadata_columns
from thalweg_bytewax.runtime.epoch_sink import (
    EpochSinkState,
    EpochSinkStats,
    LocatorMode,
    check_locator_mode,
    unlocated_guarantee,
)
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option
from thalweg_bytewax.typemap import Conversion, IdentifierMode

from . import _coverage as cov
from ._errors import describe_error, is_transient
from ._partition import _PostgresPartition

__all__ = ["PostgresSink", "WriteMode"]

_adbc = _deps.require("adbc_driver_postgresql.dbapi", extra="postgres")

logger = logging.getLogger(__name__)

WriteMode = Literal["append", "upsert"]
"""``append`` inserts every row; ``upsert`` replaces rows by key."""

TargetState = Literal["missing", "empty", "rows"]
"""What the sink found of its table at start."""

_EMPTY: Mapping[str, Conversion] = MappingProxyType({})


class PostgresSink(ShardedEpochSink[_PostgresPartition]):
    """Write keyed Arrow batches into a PostgreSQL table, once per epoch, exactly once.

    Topic-partitions are the unit of parallelism. Exactly-once via coverage; replays
    are skipped: the coverage row of each source partition is written in the same
    transaction as its rows, so the table and its coverage never disagree. Batches need
    the locator columns (``_twg_source_topic``, ``_twg_source_partition``,
    ``_twg_source_offset``); the sink writes the payload columns and the metadata
    columns ``metadata`` selects. The table is created when absent, new columns are
    added with their comments, lossless widenings (``int`` to ``bigint``) only with
    ``allow_widening=True``, and anything else is refused before a row is written.

    Transient failures (lost connection, serialization failure, deadlock, a server
    shutting down) retry the epoch's whole transaction with bounded backoff; terminal
    ones (bad data, integrity, syntax, privileges) fail the epoch naming the table.

    **Rows without a locator** (``locators="absent"``: rows from a stock Bytewax source
    through ``twg.to_batches``, window results of ``twg.window_agg``): no offsets and no
    coverage rows, so no replay can be skipped. Each epoch is still one transaction at
    the snapshot, but a crash after its ``COMMIT`` and before Bytewax's recovery snapshot
    (or a lost answer to the ``COMMIT`` that the sink retries) writes the epoch again: in
    ``"append"`` mode its rows are inserted twice (**at-least-once**); in ``"upsert"`` mode
    the replay overwrites the same keys (**effectively-once**: each key once, with its
    last value). The sink logs which of the two applies once at start. Key the stream by
    the upsert key (window results are keyed by their group key) so the rows of one key
    reach one shard in order.

    Example::

        flow = Dataflow("orders_pg")
        orders = ...  # decoded, keyed by source partition, metadata="locator"
        op.output("pg", orders, PostgresSink(dsn, "orders", contract=contract))

    Args:
        dsn: A libpq connection URI (``postgresql://user:pass@host/db``). A secret:
            never shown in messages or reprs.
        table: The table name (unquoted; validated, then quoted).
        schema: The schema of the table and of its ``_twg_coverage`` table.
        mode: ``"append"`` or ``"upsert"`` (by ``key_columns``, else the contract's
            primary key).
        key_columns: The upsert key; needs a unique constraint (added when the sink
            creates the table).
        contract: A contract (or one of its objects) whose column descriptions become
            comments and whose primary key is the default upsert key.
        contract_object: The object of a multi-object contract.
        metadata: Which metadata columns are written (``locator`` by default: topic,
            partition, offset and record id).
        allow_widening: Widen columns losslessly (e.g. ``integer`` to ``bigint``).
        conversions: Per-column opt-ins of :func:`thalweg_bytewax.catalog.plan`.
        identifiers: ``"strict"`` (lowercase names that need no quoting) or
            ``"relaxed"`` (any name, quoted) for the schema, table and column names.
        sink_name: The name of this sink in the coverage table (default
            ``<schema>.<table>``).
        shards: Number of sink partitions the topic-partitions are spread over.
        max_retries: Retries of an epoch's transaction on transient failures.
        retry_backoff_s: The first retry's delay; each next one doubles it.
        max_backoff_s: The longest delay between retries.
        connect_timeout_s: The connection timeout of both clients.
        metadata_prefix: Prefix of the metadata columns.
        locators: ``"required"`` (rows carry ``_twg_source_*`` locators: exactly once)
            or ``"absent"`` (rows without them: at-least-once appends, effectively-once
            upserts; the locator columns are then refused).
        coverage_store: Where to record each committed epoch's coverage for the flow
            (beside the raw lane), under the output's step id: a
            :class:`~thalweg_bytewax.coverage.store.CoverageStore`, a path (SQLite) or
            a ``postgresql://`` URL. None records nothing there (the sink's own
            ``_twg_coverage`` table is kept either way). ``thalweg coverage`` and
            ``thalweg recover`` read it.
    """

    def __init__(  # noqa: PLR0913 - one documented knob each
        self,
        dsn: str,
        table: str,
        *,
        schema: str = "public",
        mode: WriteMode = "append",
        key_columns: Sequence[str] | None = None,
        contract: ContractSpec | ObjectSpec | None = None,
        contract_object: str | None = None,
        metadata: MetadataPolicy | str = MetadataPolicy.LOCATOR,
        allow_widening: bool = False,
        conversions: Mapping[str, Conversion] = _EMPTY,
        identifiers: IdentifierMode = "strict",
        sink_name: str | None = None,
        shards: int = 16,
        max_retries: int = 5,
        retry_backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        metadata_prefix: str = DEFAULT_PREFIX,
        locators: LocatorMode = "required",
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(dsn, str) or "://" not in dsn:
            msg = (
                "postgres sink: `dsn` expected a libpq URI (postgresql://user@host/db); got "
                f"{'a ' + type(dsn).__name__ if not isinstance(dsn, str) else 'no URI'}"
            )
            raise ConfigError(msg)
        self._dsn = dsn
        self.identifiers: IdentifierMode = identifiers
        self.schema = pgcat.check_identifier(schema, "schema", identifiers)
        self.table = pgcat.check_identifier(table, "table", identifiers)
        self.target = f"{self.schema}.{self.table}"
        if mode not in ("append", "upsert"):
            msg = (
                f"postgres sink `{self.target}`: `mode` expected 'append' or 'upsert'; got {mode!r}"
            )
            raise ConfigError(msg)
        self.mode: WriteMode = mode
        obj = _contract_object(contract, contract_object, self.target)
        self.comments: dict[str, str] = obj.descriptions() if obj is not None else {}
        keys = tuple(key_columns) if key_columns is not None else _primary_key(obj)
        if mode == "upsert" and not keys:
            msg = (
                f"postgres sink `{self.target}`: mode='upsert' expected `key_columns` or a "
                f"contract with a primary key; got neither (name the key with "
                f"key_columns=[...], or use mode='append')"
            )
            raise ConfigError(msg)
        self.key_columns: tuple[str, ...] = (
            tuple(pgcat.check_identifier(k, "key column", identifiers) for k in keys)
            if mode == "upsert"
            else ()
        )
        for name, value in (("shards", shards), ("max_retries", max_retries)):
            low = 0 if name == "max_retries" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                msg = (
                    f"postgres sink `{self.target}`: `{name}` expected an integer >= {low}; "
                    f"got {value!r}"
                )
                raise ConfigError(msg)
        for name, fvalue in (
            ("retry_backoff_s", retry_backoff_s),
            ("max_backoff_s", max_backoff_s),
            ("connect_timeout_s", connect_timeout_s),
        ):
            if isinstance(fvalue, bool) or not isinstance(fvalue, (int, float)) or fvalue < 0:
                msg = (
                    f"postgres sink `{self.target}`: `{name}` expected a number >= 0; "
                    f"got {fvalue!r}"
                )
                raise ConfigError(msg)
        self.columns = metadata_columns(metadata_prefix, f"postgres sink `{self.target}`")
        self.metadata = MetadataPolicy(metadata)
        self.allow_widening = bool(allow_widening)
        self.conversions = dict(conversions)
        self.sink_name = sink_name if sink_name is not None else self.target
        self.shards = shards
        self.max_retries = max_retries
        self.retry_backoff_s = float(retry_backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.locators: LocatorMode = check_locator_mode(f"postgres sink `{self.target}`", locators)
        if locators == "absent" and coverage_store is not None:
            msg = (
                f"postgres sink `{self.target}`: `coverage_store` records source offsets; "
                f"expected none with locators='absent' (rows without a locator cover no "
                f"offsets); got one; drop `coverage_store`, or give the rows a locator"
            )
            raise ConfigError(msg)
        self.coverage_store = coverage_store_option(coverage_store)
        self._announced = False
        self._lock = threading.Lock()
        self._shapes: dict[pa.Schema, TableShape] = {}
        self._bookkeeping_ready = False
        self._target_at_start: TargetState = "rows"
        self._start_columns: frozenset[str] = frozenset()
        self.stats: list[EpochSinkStats] = []

    @property
    def dsn(self) -> str:
        """The connection URI (a secret: never put it in a message)."""
        return self._dsn

    def __repr__(self) -> str:
        return (
            f"PostgresSink({redact_url(self._dsn)!r}, {self.table!r}, schema={self.schema!r}, "
            f"mode={self.mode!r})"
        )

    # -- Bytewax ---------------------------------------------------------------------

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _PostgresPartition:
        self.ensure_bookkeeping()
        self._announce()
        part = _PostgresPartition(self, resume_state, shard)
        self.stats.append(part.stats)
        return part

    def _announce(self) -> None:
        """Log the guarantee for rows without a locator, once per sink and process."""
        with self._lock:
            if self._announced or self.locators != "absent":
                return
            self._announced = True
        text = unlocated_guarantee(f"postgres sink `{self.target}`", self.mode, self.key_columns)
        logger.log(logging.INFO if self.mode == "upsert" else logging.WARNING, "%s", text)

    # -- used by the partitions -------------------------------------------------------

    def connect_control(self) -> Any:
        """A new psycopg connection (autocommit off) for describe, DDL and reads."""
        try:
            return pgcat.connect(self._dsn, connect_timeout_s=self.connect_timeout_s)
        except Exception as exc:  # psycopg.Error, classified by SQLSTATE
            raise self._connect_error(exc) from None

    def connect_data(self) -> Any:
        """A new ADBC connection (autocommit off) for the epoch's transaction."""
        return _adbc.connect(self._dsn)

    def _connect_error(self, exc: Exception) -> Exception:
        detail = describe_error(exc, self._dsn)
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
                found = pgcat.select_key_locators(
                    conn, self.schema, self.table, cols, keys, values
                )
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
                allow_widening=self.allow_widening,
                conversions=self.conversions,
                identifiers=self.identifiers,
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


def _fingerprint(sink: PostgresSink, desired: pa.Schema) -> str:
    """What a provisioning depends on, hashed (the stored hash of an idempotent re-sync)."""
    parts = [
        desired.to_string(show_field_metadata=True, show_schema_metadata=False),
        repr(sorted(sink.comments.items())),
        repr(sorted(sink.conversions.items())),
        repr(sink.allow_widening),
        repr(sink.key_columns),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _contract_object(
    contract: ContractSpec | ObjectSpec | None, name: str | None, target: str
) -> ObjectSpec | None:
    if contract is None or isinstance(contract, ObjectSpec):
        return contract
    if isinstance(contract, ContractSpec):
        return contract.object(name)
    msg = (
        f"postgres sink `{target}`: `contract` expected a ContractSpec, an ObjectSpec or "
        f"None; got {type(contract).__name__}"
    )
    raise ConfigError(msg)


def _primary_key(obj: ObjectSpec | None) -> tuple[str, ...]:
    if obj is None:
        return ()
    pk = sorted(
        (c for c in obj.columns if c.primary_key_position),
        key=lambda c: c.primary_key_position or 0,
    )
    return tuple(c.name for c in pk)
