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

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType

from typing_extensions import override

from thalweg_bytewax import _deps
from thalweg_bytewax.catalog import postgres as pgcat
from thalweg_bytewax.config import SecretRef, seconds_keywords
from thalweg_bytewax.contracts.spec import ContractSpec, ObjectSpec
from thalweg_bytewax.coverage.store import CoverageStore
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataPolicy
from thalweg_bytewax.runtime.epoch_sink import (
    EpochSinkState,
    EpochSinkStats,
    LocatorMode,
    unlocated_guarantee,
)
from thalweg_bytewax.runtime.sharded_sink import ShardedEpochSink, coverage_store_option
from thalweg_bytewax.typemap import Conversion, IdentifierMode

from ._partition import _PostgresPartition
from ._table import PostgresTable, TargetState
from .config import PostgresSinkConfig, WriteMode

__all__ = ["PostgresSink", "WriteMode"]

_adbc = _deps.require("adbc_driver_postgresql.dbapi", extra="postgres")

logger = logging.getLogger(__name__)


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

    The keywords other than ``contract``, ``contract_object`` and ``coverage_store``
    build a :class:`~thalweg_bytewax.connectors.postgres.PostgresSinkConfig`
    (:attr:`config`), the model a pipeline's ``[sinks.<name>]`` table with
    ``kind = "postgres"`` builds too; the partitions read only that model, through the
    table they share.

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
        retry_backoff: The first retry's delay (default 0.5 s); each next one doubles it.
        max_backoff: The longest delay between retries (default 10 s).
        connect_timeout: The connection timeout of both clients (default 10 s).
        network_timeout: How long a connection may stay silent at the TCP level before
            the client declares it dead (default 30 s): libpq's keepalives and
            ``tcp_user_timeout`` on both clients, unless the DSN sets them.
        write_timeout: The longest one call on a shard's data connection may take (a
            partition's coverage read, an attempt at an epoch's transaction; default
            5 min). Past it the attempt is abandoned and retried on a new connection, so
            a server that stops answering fails the epoch in bounded time.
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
        retry_backoff_s: Deprecated: ``retry_backoff`` in seconds.
        max_backoff_s: Deprecated: ``max_backoff`` in seconds.
        connect_timeout_s: Deprecated: ``connect_timeout`` in seconds.
    """

    def __init__(  # noqa: PLR0913 - one documented knob each
        self,
        dsn: str | SecretRef,
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
        retry_backoff: timedelta | None = None,
        max_backoff: timedelta | None = None,
        connect_timeout: timedelta | None = None,
        network_timeout: timedelta | None = None,
        write_timeout: timedelta | None = None,
        metadata_prefix: str = DEFAULT_PREFIX,
        locators: LocatorMode = "required",
        coverage_store: CoverageStore | str | os.PathLike[str] | None = None,
        retry_backoff_s: float | None = None,
        max_backoff_s: float | None = None,
        connect_timeout_s: float | None = None,
    ) -> None:
        durations = seconds_keywords(
            PostgresSinkConfig.component,
            {
                "retry_backoff": retry_backoff,
                "max_backoff": max_backoff,
                "connect_timeout": connect_timeout,
                "network_timeout": network_timeout,
                "write_timeout": write_timeout,
            },
            {
                "retry_backoff_s": retry_backoff_s,
                "max_backoff_s": max_backoff_s,
                "connect_timeout_s": connect_timeout_s,
            },
        )
        if isinstance(key_columns, str) or (
            key_columns is not None and not isinstance(key_columns, Sequence)
        ):
            msg = f"postgres sink: `key_columns` expected column names; got {key_columns!r}"
            raise ConfigError(msg)
        self.config = PostgresSinkConfig.build(
            {
                "dsn": dsn,
                "table": table,
                "schema": schema,
                "mode": mode,
                "key_columns": tuple(key_columns or ()),
                "metadata": metadata,
                "allow_widening": allow_widening,
                "conversions": dict(conversions),
                "identifiers": identifiers,
                "sink_name": sink_name,
                "shards": shards,
                "max_retries": max_retries,
                "metadata_prefix": metadata_prefix,
                "locators": locators,
                **durations,
            }
        )
        config = self.config
        pgcat.check_identifier(config.db_schema, "schema", config.identifiers)
        pgcat.check_identifier(config.table, "table", config.identifiers)
        obj = _contract_object(contract, contract_object, config.target)
        keys = config.key_columns if key_columns is not None else _primary_key(obj)
        if config.mode == "upsert" and not keys:
            msg = (
                f"postgres sink `{config.target}`: mode='upsert' expected `key_columns` or a "
                f"contract with a primary key; got neither (name the key with "
                f"key_columns=[...], or use mode='append')"
            )
            raise ConfigError(msg)
        resolved = (
            tuple(pgcat.check_identifier(k, "key column", config.identifiers) for k in keys)
            if config.mode == "upsert"
            else ()
        )
        if config.locators == "absent" and coverage_store is not None:
            msg = (
                f"postgres sink `{config.target}`: `coverage_store` records source offsets; "
                f"expected none with locators='absent' (rows without a locator cover no "
                f"offsets); got one; drop `coverage_store`, or give the rows a locator"
            )
            raise ConfigError(msg)
        self.pg = PostgresTable(
            config,
            comments=obj.descriptions() if obj is not None else {},
            key_columns=resolved,
        )
        self.shards = config.shards
        self.columns = config.columns
        self.coverage_store = coverage_store_option(coverage_store)
        self._announced = False
        self._lock = threading.Lock()
        self.stats: list[EpochSinkStats] = []

    @property
    def target(self) -> str:
        """``<schema>.<table>``, as messages name the table."""
        return self.config.target

    @property
    def target_at_start(self) -> TargetState:
        """What the sink found of its table at start: ``missing``, ``empty`` or ``rows``."""
        return self.pg.target_at_start

    def __repr__(self) -> str:
        c = self.config
        return f"PostgresSink({c.dsn!r}, {c.table!r}, schema={c.db_schema!r}, mode={c.mode!r})"

    # -- Bytewax ---------------------------------------------------------------------

    @override
    def build_shard(
        self, step_id: str, shard: int, resume_state: EpochSinkState | None
    ) -> _PostgresPartition:
        self.pg.ensure_bookkeeping()
        self._announce()
        part = _PostgresPartition(self.pg, resume_state, shard)
        self.stats.append(part.stats)
        return part

    def _announce(self) -> None:
        """Log the guarantee for rows without a locator, once per sink and process."""
        with self._lock:
            if self._announced or self.config.locators != "absent":
                return
            self._announced = True
        mode = self.config.mode
        text = unlocated_guarantee(f"postgres sink `{self.target}`", mode, self.pg.key_columns)
        logger.log(logging.INFO if mode == "upsert" else logging.WARNING, "%s", text)


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
