"""A coverage store in PostgreSQL, for flows whose workers run on several hosts.

See :mod:`thalweg_bytewax.coverage.store` for the model (union-merged, may lag, never
lead) and the SQLite store. Needs the ``postgres`` extra.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from typing_extensions import override

from thalweg_bytewax._deps import require

require("psycopg", extra="postgres")

import psycopg  # noqa: E402 - after the install hint
from psycopg import sql  # noqa: E402

from thalweg_bytewax._redact import redact_origins_in, redact_url  # noqa: E402
from thalweg_bytewax.coverage._store_rows import (  # noqa: E402
    CoverageEntry,
    _check_sink,
    _decode,
    _encode,
    _entries,
    _UnionStore,
)
from thalweg_bytewax.coverage.spans import OffsetCoverage  # noqa: E402
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, SinkTransientError  # noqa: E402
from thalweg_bytewax.typemap import validate_identifier  # noqa: E402

__all__ = ["PostgresCoverageStore"]

logger = logging.getLogger(__name__)


class PostgresCoverageStore(_UnionStore):
    """A coverage store in a PostgreSQL table, shared by every host that reaches it.

    Each :meth:`record` runs one transaction: ``INSERT … ON CONFLICT DO NOTHING`` makes
    sure each row exists, ``SELECT … FOR UPDATE`` locks it (rows in sorted order, so two
    writers never deadlock), and the union is written back. Keep it out of the database
    a sink writes to when you can: a store describes the sink, it never lives inside it.
    (``PostgresSink`` keeps its own coverage table inside its target, in the same
    transaction as its rows; this store is the flow-wide view beside the raw lane.)

    Example::

        store = PostgresCoverageStore("postgresql://twg@db/lake", table="ops.coverage")

    Args:
        dsn: A libpq connection string or URL (credentials are never put in messages).
        table: ``table`` or ``schema.table``; created when absent.
    """

    def __init__(self, dsn: str, *, table: str = "thalweg_coverage") -> None:
        if not isinstance(dsn, str) or not dsn:
            msg = "coverage store: `dsn` expected a PostgreSQL connection string; got none"
            raise ConfigError(msg)
        parts = table.split(".") if isinstance(table, str) else []
        if not 1 <= len(parts) <= 2:  # noqa: PLR2004 - table or schema.table
            msg = f"coverage store: `table` expected `table` or `schema.table`; got {table!r}"
            raise ConfigError(msg)
        for part in parts:
            validate_identifier(
                part, mode="strict", what="coverage table", target="postgres", relaxable=False
            )
        self._dsn = dsn
        self.table = tuple(parts)
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresCoverageStore({redact_url(self._dsn)!r}, table={'.'.join(self.table)!r})"

    def describe(self) -> str:
        """Where the store is, with credentials redacted."""
        return f"postgres `{redact_url(self._dsn)}` table `{'.'.join(self.table)}`"

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with psycopg.connect(self._dsn) as conn:
                if not self._ready:
                    self._create(conn)
                yield conn
        except psycopg.OperationalError as exc:
            detail = redact_origins_in(str(exc).splitlines()[0] if str(exc) else "", self._dsn)
            msg = (
                f"coverage store {self.describe()}: connection failed or lost ({detail}); "
                f"expected a reachable PostgreSQL (retried at the next epoch)"
            )
            raise SinkTransientError(msg) from exc
        except psycopg.Error as exc:
            msg = (
                f"coverage store {self.describe()}: {type(exc).__name__} (SQLSTATE "
                f"{exc.sqlstate}); expected a table of (sink, topic, partition, ranges, "
                f"updated_at) the connecting role may write"
            )
            raise SinkTerminalError(msg) from exc

    def _ident(self) -> sql.Identifier:
        return sql.Identifier(*self.table)

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        # Concurrent `CREATE … IF NOT EXISTS` race on the catalog (a unique violation
        # on pg_type): writers starting together take turns under an advisory lock.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (".".join(self.table),))
        if len(self.table) == 2:  # noqa: PLR2004 - schema.table
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.table[0]))
            )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (sink text NOT NULL, topic text NOT NULL, "
                "partition integer NOT NULL, ranges jsonb NOT NULL, "
                "updated_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (sink, topic, partition))"
            ).format(self._ident())
        )
        conn.commit()
        self._ready = True

    @override
    def _merge(self, sink: str, plan: list[tuple[str, int, OffsetCoverage]]) -> None:
        table = self._ident()
        with self._connect() as conn, conn.transaction():
            for topic, partition, _ in plan:
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (sink, topic, partition, ranges) VALUES "
                        "(%s, %s, %s, '[]'::jsonb) ON CONFLICT DO NOTHING"
                    ).format(table),
                    (sink, topic, partition),
                )
            for topic, partition, cov in plan:
                row = conn.execute(
                    sql.SQL(
                        "SELECT ranges FROM {} WHERE sink=%s AND topic=%s AND partition=%s "
                        "FOR UPDATE"
                    ).format(table),
                    (sink, topic, partition),
                ).fetchone()
                stored = _decode(self.describe(), sink, topic, partition, row[0] if row else [])
                merged = stored.union(cov)
                if merged == stored:
                    continue
                conn.execute(
                    sql.SQL(
                        "UPDATE {} SET ranges=%s::jsonb, updated_at=now() "
                        "WHERE sink=%s AND topic=%s AND partition=%s"
                    ).format(table),
                    (_encode(merged), sink, topic, partition),
                )

    @override
    def _delete(self, sink: str, keys: list[tuple[str, int]]) -> None:
        statement = sql.SQL("DELETE FROM {} WHERE sink=%s AND topic=%s AND partition=%s")
        with self._connect() as conn, conn.transaction():
            for topic, partition in keys:
                conn.execute(statement.format(self._ident()), (_check_sink(sink), topic, partition))

    def entries(self, sink: str | None = None) -> list[CoverageEntry]:
        """Every stored row (of ``sink``, or all), sorted by sink, topic and partition."""
        query = sql.SQL("SELECT sink, topic, partition, ranges, updated_at FROM {}").format(
            self._ident()
        )
        args: tuple[str, ...] = ()
        if sink is not None:
            query, args = query + sql.SQL(" WHERE sink=%s"), (sink,)
        with self._connect() as conn:
            rows = conn.execute(query + sql.SQL(" ORDER BY sink, topic, partition"), args)
            fetched = rows.fetchall()
        return _entries(self.describe(), fetched)
