"""A query run once per batch: prepared once, then one DuckDB execution per run.

:meth:`SqlSession.prepare <thalweg_bytewax.sql.engine.SqlSession.prepare>` gives a
:class:`PreparedQuery`: each thread gets a cursor of its own with the query's relation
registered once, as a feed that each run re-points at its batch, and the query's
relation built once. A run then costs one DuckDB execution, not a registration, a parse
and a bind in Python besides.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from thalweg_bytewax.errors import ThalwegError
from thalweg_bytewax.sql.bounds import run_bounded
from thalweg_bytewax.system.thread_slots import ThreadSlots

__all__ = ["PreparedQuery"]


class _Session(Protocol):
    """What a prepared query needs of its session (a ``SqlSession`` is one)."""

    @property
    def memory_limit_bytes(self) -> int:
        """The memory limit of the session's database."""

    @property
    def generation(self) -> int:
        """Which database of the session is current (it is renewed after many runs)."""

    def new_cursor(self) -> Any:
        """A new cursor on the session's database."""

    def ran(self) -> None:
        """Count one query run (the session renews its database after many)."""


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

    __slots__ = ("cursor", "feed", "generation", "relation", "schema")

    def __init__(self, cursor: Any, generation: int) -> None:
        self.cursor = cursor
        self.generation = generation
        self.feed = _Feed()
        self.relation: Any = None
        self.schema: pa.Schema | None = None


def _none() -> None:
    return None


class PreparedQuery:
    """One query over one Arrow relation, run once per batch (``SqlSession.prepare``).

    Per thread (and process): a cursor of its own on the session's database, with the
    relation registered once as a feed and the query's relation built on its first run
    (rebuilt when the input schema changes, or when the session renews its database).
    That state is kept per OS thread (``ThreadSlots``), not in a thread-local (a
    cluster's worker finds a thread-local empty at every batch, and dropping a DuckDB
    relation as a worker thread ends aborts the process); a forked child and an
    unpickled copy start without it and rebuild it on use.
    """

    def __init__(
        self,
        session: _Session,
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
        self._threads: ThreadSlots[_Prepared | None] = ThreadSlots(_none)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_threads"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._threads = ThreadSlots(_none)

    def run(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """The query's result over ``data``, materialised.

        Raises:
            SqlTimeoutError: When the bound passed and the query was interrupted.
            SqlMemoryError: When the query needed more than the session's memory limit.
            duckdb.Error: Whatever DuckDB raises for the query (a bind error on the
                first run over a schema).
        """
        state = self._threads.get()
        generation = self.session.generation
        if state is None or state.generation != generation:  # first run, or a new database
            state = _Prepared(self.session.new_cursor(), generation)
            self._threads.put(state)
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
            return run_bounded(
                state.cursor,
                self.timeout_seconds,
                state.relation.to_arrow_table,
                self.session.memory_limit_bytes,
            )
        finally:
            state.feed.data = None
            self.session.ran()
