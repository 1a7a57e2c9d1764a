"""The SQL engine of thalweg: isolated DuckDB sessions, bounded in time and memory, over Arrow.

Contract rules run here, and the SQL operators share it. User SQL is accepted only in
the shapes :mod:`thalweg_bytewax.sql.syntax` checks (one expression, or one ``SELECT``),
so nothing else it might do (DDL, ``SET``, ``ATTACH``, ``PRAGMA``) reaches a connection.
On top of that, every :class:`SqlSession` is its own connection to its own in-memory
database (created lazily, one cursor per thread), with external access off and the
configuration locked: no session can see another's state, nor the process-wide
connection of :func:`shared_cursor`, which runs only this package's own queries.

Every session query runs under a time bound and every session's database under a memory
limit (:mod:`thalweg_bytewax.sql.bounds`): past the time bound a watchdog interrupts the
query and :meth:`SqlSession.query` raises
:class:`~thalweg_bytewax.sql.bounds.SqlTimeoutError`. DuckDB's own default memory
limit is 80 % of the machine's RAM, per database; a session's database has a
``memory_limit`` and no temporary directory, so a query that needs more than the limit
for its hash tables, sorts, aggregates and intermediate results fails with
:class:`~thalweg_bytewax.sql.bounds.SqlMemoryError` instead of growing the process or
spilling to disk. The limit is per session (per database), shared by the session's
threads. DuckDB does not count every allocation against it: one scalar value built in a
single function call (``repeat('x', 10^9)``) is allocated outside it.

A query run once per batch is prepared once (:meth:`SqlSession.prepare`, a
:class:`~thalweg_bytewax.sql.prepared.PreparedQuery`).

DuckDB is imported on first use (``_deps.require``), never at import time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.sql._functions import install_functions
from thalweg_bytewax.sql.bounds import DEFAULT_MEMORY_LIMIT_BYTES, check_memory_limit, run_bounded
from thalweg_bytewax.sql.prepared import PreparedQuery
from thalweg_bytewax.system.thread_slots import ThreadSlots

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = ["SqlSession", "shared_cursor"]

logger = logging.getLogger(__name__)


def _open_sandboxed(
    threads: int | None = None,
    memory_limit_bytes: int | None = None,
    functions: Sequence[WasmFunction] = (),
) -> Any:
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
    if functions:
        from thalweg_bytewax.udf.sql_functions import register  # noqa: PLC0415 - optional

        register(con, functions)
    con.execute("SET lock_configuration=true")
    return con


RENEW_AFTER_RUNS = 1024
"""Query runs after which a :class:`SqlSession` opens its database afresh.

DuckDB keeps a little memory of every run of a query that joins after the run ends: an
entry in its buffer pool's eviction queue, and the handle of each block the run
unpinned (its hash table's), ~1 KB a run of the orders flow's join
(``benchmarks/sql_renewal.py``: 20,000 runs of it on one database grew glibc's heap
20.4 MB; a query without a join, 30,000 runs, 0.2 MB). The orders flow's heap grew
~3 MB a minute, which ``heaptrack`` put there. A database opened afresh (~20 ms, at the
next run) starts without any of it; the old one is closed once its last cursor is
dropped. Nothing outlives a run on these databases (each batch is registered for its
run only), so renewing them changes no result. Renewed every 1,024 runs, the same
20,000 runs grew the heap 0.8 MB, at 1,000-1,055 us of CPU a run against 1,014-1,043
never renewing (alternated).
"""


class SqlSession:
    """An isolated in-memory DuckDB database, sandboxed and bounded in time and memory.

    The connection is opened on first use (``duckdb.connect()`` costs ~20 ms, so once
    per session and process, never per batch) with external access off, its memory
    limit set, no temporary directory and the configuration locked; each thread gets
    its own cursor. Pickling drops the connection; it reopens on first use. Every
    :data:`RENEW_AFTER_RUNS` query runs the database is opened afresh, which bounds
    what DuckDB keeps of past runs.

    Args:
        timeout_seconds: The bound on each query; ``None`` for no bound.
        threads: DuckDB's thread count for the database (``None``: one per core). One
            runs each query on its caller's thread alone: the choice for many small
            queries from parallel workers.
        memory_limit_bytes: The database's memory limit (DuckDB ``memory_limit``), shared
            by every query running on it at once; a query past it raises
            :class:`~thalweg_bytewax.sql.bounds.SqlMemoryError`. At least 16 MiB
            (:data:`~thalweg_bytewax.sql.bounds.MIN_MEMORY_LIMIT_BYTES`).

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
        functions: Sequence[WasmFunction] = (),
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
        self.functions = tuple(functions)
        self._lock = threading.Lock()
        self._con: tuple[int, Any] | None = None
        self._cursors: ThreadSlots[Any] = ThreadSlots(self.new_cursor)
        self._runs = 0
        self.generation = 0
        """Which of the session's databases is current: it counts the renewals."""

    def __getstate__(self) -> dict[str, Any]:
        return {
            "timeout_seconds": self.timeout_seconds,
            "threads": self.threads,
            "memory_limit_bytes": self.memory_limit_bytes,
            "functions": self.functions,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["timeout_seconds"],
            threads=state.get("threads"),
            memory_limit_bytes=state.get("memory_limit_bytes", DEFAULT_MEMORY_LIMIT_BYTES),
            functions=state.get("functions", ()),
        )

    def cursor(self) -> Any:
        """This thread's cursor on the session's connection (one per OS thread)."""
        return self._cursors.get()

    def new_cursor(self) -> Any:
        """A new cursor on the session's connection: its registrations are its own."""
        pid = os.getpid()
        with self._lock:
            if self._con is None or self._con[0] != pid:
                self._con = (
                    pid,
                    _open_sandboxed(self.threads, self.memory_limit_bytes, self.functions),
                )
            return self._con[1].cursor()

    def ran(self) -> None:
        """Count one query run; past :data:`RENEW_AFTER_RUNS`, open the database afresh.

        The next :meth:`cursor` or :meth:`new_cursor` opens the new database; a cursor
        of the old one still finishes its run. (Threads counting at once may lose a
        count, which only delays a renewal.)
        """
        self._runs += 1
        if self._runs < RENEW_AFTER_RUNS:
            return
        with self._lock:
            if self._runs >= RENEW_AFTER_RUNS:
                self._runs = 0
                self._con = None
                self._cursors = ThreadSlots(self.new_cursor)
                self.generation += 1

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
                return run_bounded(
                    cur,
                    bound,
                    lambda: cur.sql(sql, params=dict(params)).to_arrow_table(),
                    self.memory_limit_bytes,
                )
            return run_bounded(
                cur, bound, lambda: cur.sql(sql).to_arrow_table(), self.memory_limit_bytes
            )
        finally:
            for name in tables:
                cur.unregister(name)
            self.ran()

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


_shared_lock = threading.Lock()
_shared: tuple[int, Any] | None = None


def shared_cursor() -> Any:
    """This thread's cursor on the process's one sandboxed DuckDB connection.

    For this package's own queries (e.g. expanding an audit lane). User SQL never runs
    here: it runs on a :class:`SqlSession` of its own. External access is off and the
    configuration locked.
    """
    return _shared_cursors.get()


def _new_shared_cursor() -> Any:
    global _shared
    pid = os.getpid()
    with _shared_lock:
        if _shared is None or _shared[0] != pid:
            _shared = (pid, _open_sandboxed())
        return _shared[1].cursor()


_shared_cursors: ThreadSlots[Any] = ThreadSlots(_new_shared_cursor)
