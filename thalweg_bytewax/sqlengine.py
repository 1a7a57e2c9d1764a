"""The SQL engine of thalweg: isolated DuckDB sessions, bounded in time, over Arrow.

Contract rules run here today, and the SQL operators share it. User SQL is accepted only
in one shape:

* a row predicate is exactly one SQL *expression* (parsed on its own by DuckDB's
  expression parser, so ``x > 1; CREATE MACRO ...`` is refused, :func:`check_expression`);
* a scalar query is exactly one ``SELECT`` statement (:func:`check_query`).

Each is then embedded in a query the caller writes with :func:`predicate_sql` or
:func:`scalar_sql`, on its own lines so a trailing ``--`` comment cannot swallow the rest.
Nothing else user SQL might do (DDL, ``SET``, ``ATTACH``, ``PRAGMA``) is a single
expression or a ``SELECT``, so it never reaches a connection. On top of that, every
:class:`SqlSession` is its own connection to its own in-memory database (created lazily,
one cursor per thread), with external access off and the configuration locked: no
session can see another's state, nor the process-wide connection of
:func:`shared_cursor`, which runs only this package's own queries.

Every session query runs under a time bound: a watchdog thread calls
``cursor.interrupt()`` once the bound passes, and :meth:`SqlSession.query` raises
:class:`SqlTimeoutError`. The thread runs while queries are armed, and ends half a
second after the last.

Every session is bounded in memory too: its database has a ``memory_limit`` (DuckDB's
own default is 80 % of the machine's RAM, per database) and no temporary directory, so a
query that needs more than the limit for its hash tables, sorts, aggregates and
intermediate results fails with :class:`SqlMemoryError` instead of growing the process or
spilling to disk. The limit is per session (per database), shared by the session's
threads. DuckDB does not count every allocation against it: one scalar value built in a
single function call (``repeat('x', 10^9)``) is allocated outside it.

A query run once per batch is prepared once (:meth:`SqlSession.prepare`): each thread
gets a cursor of its own with the query's relation registered once, as a feed that each
run re-points at its batch, and the query's relation built once. A run then costs one
DuckDB execution, not a registration, a parse and a bind in Python besides.

DuckDB is imported on first use (``_deps.require``), never at import time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax._sqlfunctions import FUNCTION_NAMES, install_functions
from thalweg_bytewax._sqlwatchdog import Watchdog
from thalweg_bytewax.errors import ConfigError, ThalwegError

__all__ = [
    "FUNCTION_NAMES",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "MIN_MEMORY_LIMIT_BYTES",
    "PreparedQuery",
    "SqlError",
    "SqlMemoryError",
    "SqlSession",
    "SqlTimeoutError",
    "check_expression",
    "check_memory_limit",
    "check_query",
    "duckdb_type",
    "engine_errors",
    "first_line",
    "format_bytes",
    "predicate_sql",
    "quote_ident",
    "scalar_sql",
    "shared_cursor",
]

logger = logging.getLogger(__name__)


class SqlError(ConfigError):
    """User SQL is refused: not the one expression or ``SELECT`` expected, or unparsable.

    The message says what was expected.
    """


class SqlTimeoutError(ThalwegError):
    """A query ran past its time bound and was interrupted."""


class SqlMemoryError(ThalwegError):
    """A query needed more memory than its session's limit and was stopped."""


DEFAULT_MEMORY_LIMIT_BYTES = 256 * 1024 * 1024
"""The default memory limit of a :class:`SqlSession`'s database (256 MiB)."""

# Below this DuckDB cannot run the smallest query over an Arrow batch once its own
# buffers are counted; a limit under it would fail every query, not bound one.
MIN_MEMORY_LIMIT_BYTES = 16 * 1024 * 1024
"""The smallest memory limit a session accepts (16 MiB)."""


def format_bytes(n: int) -> str:
    """``n`` bytes for a message: whole MiB when exact (``256 MiB``), else bytes."""
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def engine_errors() -> tuple[type[Exception], ...]:
    """What a failing :meth:`SqlSession.query` raises: DuckDB's errors, time and memory."""
    duckdb = require("duckdb", extra="sql")
    return (duckdb.Error, SqlTimeoutError, SqlMemoryError)


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (inner quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def duckdb_type(t: pa.DataType) -> str | None:
    """The DuckDB type name for the Arrow type ``t``, or ``None`` where there is no plain one."""
    simple = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.uint8(): "UTINYINT",
        pa.uint16(): "USMALLINT",
        pa.uint32(): "UINTEGER",
        pa.uint64(): "UBIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.date32(): "DATE",
        pa.time64("us"): "TIME",
        pa.binary(): "BLOB",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    return None


def predicate_sql(expression: str) -> str:
    """``expression`` parenthesised on lines of its own (a ``--`` comment stays inside)."""
    return f"(\n{expression}\n)"


def scalar_sql(query: str) -> str:
    """A ``SELECT`` over the scalar query ``query``, on lines of its own."""
    return f"SELECT * FROM (\n{query}\n) AS q"  # noqa: S608 - checked to be one SELECT


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s text (its type name when it has none), for messages."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def check_expression(expression: str) -> None:
    """Refuse anything but exactly one SQL expression.

    Raises:
        SqlError: When ``expression`` is empty, does not parse, or holds more than
            one expression or statement.
    """
    duckdb = require("duckdb", extra="sql")
    if not expression.strip():
        msg = "expected one SQL expression; got an empty string"
        raise SqlError(msg)
    try:
        duckdb.SQLExpression(expression)
    except duckdb.Error as exc:
        msg = (
            f"expected exactly one SQL expression (no `;`, no statements); got "
            f"{expression!r}: {first_line(exc)}"
        )
        raise SqlError(msg) from exc


_parser_lock = threading.Lock()
_parser: tuple[int, Any] | None = None


def _parser_connection() -> Any:
    # Parsing only: nothing is ever executed on this connection.
    global _parser
    with _parser_lock:
        if _parser is None or _parser[0] != os.getpid():
            _parser = (os.getpid(), require("duckdb", extra="sql").connect())
        return _parser[1]


def check_query(query: str) -> None:
    """Refuse anything but exactly one ``SELECT`` statement.

    Raises:
        SqlError: When ``query`` does not parse, holds several statements, or one
            that is not a ``SELECT`` (DDL, ``SET``, ``ATTACH``, ``PRAGMA`` ...).
    """
    duckdb = require("duckdb", extra="sql")
    con = _parser_connection()
    try:
        with _parser_lock:
            statements = con.extract_statements(query)
    except duckdb.Error as exc:
        msg = f"expected one SELECT statement; got {query!r}: {first_line(exc)}"
        raise SqlError(msg) from exc
    kinds = [str(s.type).rsplit(".", 1)[-1] for s in statements]
    if kinds != ["SELECT"]:
        msg = f"expected exactly one SELECT statement; got {kinds or ['nothing']!r} in {query!r}"
        raise SqlError(msg)


_watchdog = Watchdog()


def _open_sandboxed(threads: int | None = None, memory_limit_bytes: int | None = None) -> Any:
    duckdb = require("duckdb", extra="sql")
    # The thread count and the memory limit are fixed here: once the configuration is
    # locked, SET cannot move them.
    config: dict[str, str | int] = {}
    if threads is not None:
        config["threads"] = threads
    if memory_limit_bytes is not None:
        # No temporary directory: past the limit a query fails, it never spills to disk.
        config.update(
            memory_limit=f"{memory_limit_bytes}B", temp_directory="", max_temp_directory_size="0B"
        )
    con = duckdb.connect(config=config)
    con.execute("SET enable_external_access=false")
    # Timestamps with a zone render and convert in UTC whatever the host's zone is.
    con.execute("SET TimeZone='UTC'")
    install_functions(con)
    con.execute("SET lock_configuration=true")
    return con


class SqlSession:
    """An isolated in-memory DuckDB database, sandboxed and bounded in time and memory.

    The connection is opened on first use (``duckdb.connect()`` costs ~20 ms, so once
    per session and process, never per batch) with external access off, its memory
    limit set, no temporary directory and the configuration locked; each thread gets
    its own cursor. Pickling drops the connection; it reopens on first use.

    Args:
        timeout_seconds: The bound on each query; ``None`` for no bound.
        threads: DuckDB's thread count for the database (``None``: one per core). One
            runs each query on its caller's thread alone: the choice for many small
            queries from parallel workers.
        memory_limit_bytes: The database's memory limit (DuckDB ``memory_limit``), shared
            by every query running on it at once; a query past it raises
            :class:`SqlMemoryError`. At least :data:`MIN_MEMORY_LIMIT_BYTES`.

    Raises:
        ConfigError: When ``timeout_seconds`` or ``threads`` is not positive, or
            ``memory_limit_bytes`` is not an integer of at least 16 MiB.
    """

    def __init__(
        self,
        timeout_seconds: float | None,
        *,
        threads: int | None = None,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    ) -> None:
        if timeout_seconds is not None and not timeout_seconds > 0:
            msg = (
                f"sql session: expected a positive `timeout_seconds` or None; "
                f"got {timeout_seconds!r}"
            )
            raise ConfigError(msg)
        if threads is not None and not (isinstance(threads, int) and threads > 0):
            msg = f"sql session: expected a positive `threads` or None; got {threads!r}"
            raise ConfigError(msg)
        check_memory_limit(memory_limit_bytes, where="sql session")
        self.timeout_seconds = timeout_seconds
        self.threads = threads
        self.memory_limit_bytes = memory_limit_bytes
        self._lock = threading.Lock()
        self._con: tuple[int, Any] | None = None
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "timeout_seconds": self.timeout_seconds,
            "threads": self.threads,
            "memory_limit_bytes": self.memory_limit_bytes,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["timeout_seconds"],
            threads=state.get("threads"),
            memory_limit_bytes=state.get("memory_limit_bytes", DEFAULT_MEMORY_LIMIT_BYTES),
        )

    def cursor(self) -> Any:
        """This thread's cursor on the session's connection."""
        pid = os.getpid()
        cur = getattr(self._local, "cursor", None)
        if cur is not None and getattr(self._local, "pid", None) == pid:
            return cur
        cur = self.new_cursor()
        self._local.cursor = cur
        self._local.pid = pid
        return cur

    def new_cursor(self) -> Any:
        """A new cursor on the session's connection: its registrations are its own."""
        pid = os.getpid()
        with self._lock:
            if self._con is None or self._con[0] != pid:
                self._con = (pid, _open_sandboxed(self.threads, self.memory_limit_bytes))
            return self._con[1].cursor()

    def _bound(self, timeout_seconds: float | None) -> float | None:
        return self.timeout_seconds if timeout_seconds == -1.0 else timeout_seconds

    def query(
        self,
        tables: Mapping[str, pa.Table | pa.RecordBatch],
        sql: str,
        *,
        timeout_seconds: float | None = -1.0,
        params: Mapping[str, object] | None = None,
    ) -> pa.Table:
        """Run ``sql`` over ``tables`` (registered by name for this query only).

        Args:
            tables: Arrow data to expose, by table name.
            sql: The query (written by this package around checked user SQL).
            timeout_seconds: Override the session's bound (``None``: unbounded).
            params: Values for the query's named ``$name`` parameters.

        Returns:
            The result, materialised.

        Raises:
            SqlTimeoutError: When the bound passed and the query was interrupted.
            SqlMemoryError: When the query needed more than the memory limit.
            duckdb.Error: Whatever DuckDB raises for the query.
        """
        cur = self.cursor()
        for name, data in tables.items():
            table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
            cur.register(name, table)
        try:
            bound = self._bound(timeout_seconds)
            if params:
                return _bounded(
                    cur,
                    bound,
                    lambda: cur.sql(sql, params=dict(params)).to_arrow_table(),
                    self.memory_limit_bytes,
                )
            return _bounded(
                cur, bound, lambda: cur.sql(sql).to_arrow_table(), self.memory_limit_bytes
            )
        finally:
            for name in tables:
                cur.unregister(name)

    def prepare(
        self,
        name: str,
        sql: str,
        *,
        timeout_seconds: float | None = -1.0,
        params: Mapping[str, object] | None = None,
    ) -> PreparedQuery:
        """``sql`` over one Arrow relation ``name``, prepared to run once per batch.

        Args:
            name: The relation name the query reads its batch as.
            sql: The query (written by this package around checked user SQL).
            timeout_seconds: Override the session's bound (``None``: unbounded).
            params: Values for the query's named ``$name`` parameters.
        """
        return PreparedQuery(self, name, sql, self._bound(timeout_seconds), dict(params or {}))


def check_memory_limit(
    memory_limit_bytes: object,
    *,
    where: str,
    argument: str = "memory_limit_bytes",
    error: type[ConfigError] = ConfigError,
) -> None:
    """Refuse a memory limit that is not an integer of at least 16 MiB.

    Raises:
        ConfigError: (``error``) Naming ``where``, the ``argument`` and the value.
    """
    if (
        isinstance(memory_limit_bytes, bool)
        or not isinstance(memory_limit_bytes, int)
        or memory_limit_bytes < MIN_MEMORY_LIMIT_BYTES
    ):
        msg = (
            f"{where}: expected `{argument}` to be an integer of at least "
            f"{MIN_MEMORY_LIMIT_BYTES} (16 MiB); got {memory_limit_bytes!r}"
        )
        raise error(msg)


def _bounded(cur: Any, bound: float | None, run: Any, memory_limit_bytes: int) -> pa.Table:
    """``run()`` with ``cur`` interrupted once ``bound`` seconds pass."""
    duckdb = require("duckdb", extra="sql")
    token = _watchdog.arm(cur, bound) if bound is not None else None
    try:
        table: pa.Table = run()
        return table
    except duckdb.InterruptException as exc:
        msg = f"sql session: expected the query to finish within {bound} s; got interrupted"
        raise SqlTimeoutError(msg) from exc
    except duckdb.OutOfMemoryException as exc:
        msg = (
            f"sql session: expected the query to fit in its memory limit of "
            f"{format_bytes(memory_limit_bytes)}; got {first_line(exc)}"
        )
        raise SqlMemoryError(msg) from exc
    finally:
        if token is not None:
            _watchdog.disarm(token)


class _Feed:
    """What a prepared query's relation reads: re-pointed at each run's data.

    DuckDB reads a registered object with ``__arrow_c_stream__`` afresh on every
    execution, so one registration serves every run (zero-copy, as a registered table).
    """

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: pa.Table | pa.RecordBatch | None = None

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> Any:
        if self.data is None:  # pragma: no cover - only read during a run
            msg = "sql session: expected a prepared query's data during its run; got none"
            raise ThalwegError(msg)
        return self.data.__arrow_c_stream__(requested_schema)


class _Prepared:
    """One thread's state of a prepared query: its cursor, feed and relation."""

    __slots__ = ("cursor", "feed", "relation", "schema")

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.feed = _Feed()
        self.relation: Any = None
        self.schema: pa.Schema | None = None


class PreparedQuery:
    """One query over one Arrow relation, run once per batch (:meth:`SqlSession.prepare`).

    Per thread (and process): a cursor of its own on the session's database, with the
    relation registered once as a feed and the query's relation built on its first run
    (rebuilt when the input schema changes). That state is kept by thread id, not in a
    thread-local (dropping a DuckDB relation as a worker thread ends aborts the
    process), and is not pickled: it is rebuilt on use.
    """

    def __init__(
        self,
        session: SqlSession,
        name: str,
        sql: str,
        timeout_seconds: float | None,
        params: dict[str, object],
    ) -> None:
        self.session = session
        self.name = name
        self.sql = sql
        self.timeout_seconds = timeout_seconds
        self.params = params
        self._threads: dict[tuple[int, int], _Prepared] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_threads": {}}

    def run(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """The query's result over ``data``, materialised.

        Raises:
            SqlTimeoutError: When the bound passed and the query was interrupted.
            SqlMemoryError: When the query needed more than the session's memory limit.
            duckdb.Error: Whatever DuckDB raises for the query (a bind error on the
                first run over a schema).
        """
        key = (os.getpid(), threading.get_ident())  # a live thread's id is its own
        state = self._threads.get(key)
        if state is None:
            state = self._threads[key] = _Prepared(self.session.new_cursor())
        state.feed.data = data
        try:
            schema = data.schema
            if state.schema is None or not schema.equals(state.schema):
                # DuckDB reads the feed's schema as it registers it; a bind error leaves
                # no relation, so the next run binds again.
                state.relation = state.schema = None
                state.cursor.register(self.name, state.feed)
                params = {"params": self.params} if self.params else {}
                state.relation = state.cursor.sql(self.sql, **params)
                state.schema = schema
            return _bounded(
                state.cursor,
                self.timeout_seconds,
                state.relation.to_arrow_table,
                self.session.memory_limit_bytes,
            )
        finally:
            state.feed.data = None


_shared_lock = threading.Lock()
_shared: tuple[int, Any] | None = None
_shared_local = threading.local()


def shared_cursor() -> Any:
    """This thread's cursor on the process's one sandboxed DuckDB connection.

    For this package's own queries (e.g. expanding an audit lane). User SQL never runs
    here: it runs on a :class:`SqlSession` of its own. External access is off and the
    configuration locked.
    """
    global _shared
    pid = os.getpid()
    cur = getattr(_shared_local, "cursor", None)
    if cur is not None and getattr(_shared_local, "pid", None) == pid:
        return cur
    with _shared_lock:
        if _shared is None or _shared[0] != pid:
            _shared = (pid, _open_sandboxed())
        cur = _shared[1].cursor()
    _shared_local.cursor = cur
    _shared_local.pid = pid
    return cur
