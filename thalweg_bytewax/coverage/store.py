"""The coverage store: per sink, topic and partition, the source offsets that landed.

A sink records into the store from its own durable commit (the epoch-sink base does it
right after ``commit_epoch()`` returns, before the epoch's state goes to Bytewax), so a
store may lag what a sink holds, never lead it. Every write is a read-merge-write in one
transaction that holds the row's write lock: coverage is merged by union, never
last-write-wins, so concurrent writers (worker threads, processes, hosts) only ever add
to each other. It lives beside the raw lane (``<lane>/_coverage.sqlite3``: names that
start with ``_`` are skipped by pyarrow datasets and DuckDB globs), never inside the
sink it describes.

- :class:`SqliteCoverageStore` — a local file, WAL mode, ``BEGIN IMMEDIATE``.
- :class:`~thalweg_bytewax.coverage.postgres.PostgresCoverageStore` — a table in
  PostgreSQL (extra ``postgres``): the row is created with ``INSERT … ON CONFLICT DO
  NOTHING`` and merged under ``SELECT … FOR UPDATE``.

Both keep one row per ``(sink, topic, partition)``: ``ranges`` (the spans as JSON,
``[[first, last], …]``) and ``updated_at``. ``thalweg coverage`` reads them back.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from typing_extensions import override

from thalweg_bytewax.coverage._store_rows import (
    CoverageEntry,
    PartitionKey,
    _check_sink,
    _decode,
    _encode,
    _entries,
    _UnionStore,
)
from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import (
    ConfigError,
    SinkTerminalError,
    SinkTransientError,
    sink_io_error,
)

__all__ = [
    "DEFAULT_FILE_NAME",
    "CoverageEntry",
    "CoverageStore",
    "SqliteCoverageStore",
    "open_coverage_store",
]

logger = logging.getLogger(__name__)

DEFAULT_FILE_NAME = "_coverage.sqlite3"
"""The store's file name when a directory is given (hidden from dataset readers by ``_``)."""

# How long a writer waits for another writer's transaction: epochs are seconds apart and
# each merge holds the lock for well under a millisecond, so 30 s only bites on a hung peer.
_BUSY_TIMEOUT_S = 30.0


@runtime_checkable
class CoverageStore(Protocol):
    """Where sinks record the offsets that landed, merged by union.

    Implementations merge every :meth:`record` into what is stored in one transaction
    under a write lock, so that concurrent writers never erase each other's coverage.
    """

    def record(self, sink: str, coverage: Mapping[PartitionKey, OffsetCoverage]) -> None:
        """Merge ``coverage`` (per ``(topic, partition)``) into the sink's rows, by union.

        Raises:
            SinkTransientError: When the store is busy or unreachable (retry later).
            SinkTerminalError: When the store holds something that is not coverage.
        """
        ...

    def entries(self, sink: str | None = None) -> list[CoverageEntry]:
        """Every stored row (of one sink, or all), sorted by sink, topic and partition."""
        ...

    def forget(self, sink: str, partitions: Iterable[PartitionKey]) -> None:
        """Delete the sink's rows of ``partitions``: its target no longer holds them.

        The one write that is not a union: a sink calls it when it finds its target
        emptied or dropped at start, before it records anything again, so the store
        never claims offsets the target lost.

        Raises:
            SinkTransientError: When the store is busy or unreachable (retry later).
        """
        ...

    def describe(self) -> str:
        """Where the store is, for messages (credentials redacted)."""
        ...


class SqliteCoverageStore(_UnionStore):
    """A coverage store in one SQLite file (WAL mode), safe for concurrent processes.

    Each :meth:`record` opens a connection, takes the write lock with ``BEGIN
    IMMEDIATE``, reads the rows it merges into, writes the unions and commits; writers
    of other threads and processes wait for the lock (up to 30 s), so the final store
    is the union of everything recorded. Keep the file on a local file system: SQLite's
    locking is not reliable over NFS. Use :class:`PostgresCoverageStore` to share a
    store between hosts.

    Example::

        store = SqliteCoverageStore("lake/raw")        # lake/raw/_coverage.sqlite3
        store.record("orders.raw_lane", {("orders", 0): OffsetCoverage([(0, 99)])})

    Args:
        path: The database file, or a directory to hold ``_coverage.sqlite3``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            msg = f"coverage store: `path` expected a file or directory; got {path!r}"
            raise ConfigError(msg)
        target = Path(path)
        # A directory (existing, or a suffix-less path such as a lane not yet written)
        # holds the default file; anything else is the database file itself.
        is_dir = target.is_dir() or (not target.exists() and not target.suffix)
        self.path = target / DEFAULT_FILE_NAME if is_dir else target
        self._ready = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteCoverageStore({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._ready = False
        self._lock = threading.Lock()

    def describe(self) -> str:
        """Where the store is, e.g. ``sqlite `lake/raw/_coverage.sqlite3```."""
        return f"sqlite `{self.path}`"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(
                sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            ) as conn:
                if not self._ready:
                    self._create(conn)
                yield conn
        except sqlite3.OperationalError as exc:
            msg = (
                f"coverage store {self.describe()}: {type(exc).__name__} ({exc}); expected a "
                f"writable SQLite file on a local file system (retried at the next epoch)"
            )
            raise SinkTransientError(msg) from exc
        except OSError as exc:
            msg = f"coverage store {self.describe()}: cannot create its directory"
            raise sink_io_error(msg, exc) from exc
        except sqlite3.DatabaseError as exc:
            msg = (
                f"coverage store {self.describe()}: cannot use it ({type(exc).__name__}: "
                f"{exc}); expected a SQLite coverage store; move the file aside"
            )
            raise SinkTerminalError(msg) from exc

    def _create(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS coverage ("
                " sink TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,"
                " ranges TEXT NOT NULL, updated_at TEXT NOT NULL,"
                " PRIMARY KEY (sink, topic, partition))"
            )
            self._ready = True

    @override
    def _merge(self, sink: str, plan: list[tuple[str, int, OffsetCoverage]]) -> None:
        now = datetime.now(UTC).isoformat()
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for topic, partition, cov in plan:
                    row = conn.execute(
                        "SELECT ranges FROM coverage WHERE sink=? AND topic=? AND partition=?",
                        (sink, topic, partition),
                    ).fetchone()
                    stored = (
                        _decode(self.describe(), sink, topic, partition, row[0]) if row else None
                    )
                    merged = cov if stored is None else stored.union(cov)
                    if merged == stored:
                        continue
                    conn.execute(
                        "INSERT INTO coverage (sink, topic, partition, ranges, updated_at) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (sink, topic, partition) "
                        "DO UPDATE SET ranges=excluded.ranges, updated_at=excluded.updated_at",
                        (sink, topic, partition, _encode(merged), now),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @override
    def _delete(self, sink: str, keys: list[tuple[str, int]]) -> None:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "DELETE FROM coverage WHERE sink=? AND topic=? AND partition=?",
                    [(_check_sink(sink), t, p) for t, p in keys],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def entries(self, sink: str | None = None) -> list[CoverageEntry]:
        """Every stored row (of ``sink``, or all), sorted by sink, topic and partition.

        Raises:
            ConfigError: When the store file does not exist.
        """
        if not self.path.is_file():
            msg = (
                f"coverage store {self.describe()}: no such file; expected the store a sink "
                f"was given as `coverage_store=` (a lane directory holds `{DEFAULT_FILE_NAME}`)"
            )
            raise ConfigError(msg)
        query = "SELECT sink, topic, partition, ranges, updated_at FROM coverage"
        args: tuple[str, ...] = ()
        if sink is not None:
            query, args = query + " WHERE sink=?", (sink,)
        with self._connect() as conn:
            rows = conn.execute(query + " ORDER BY sink, topic, partition", args).fetchall()
        return _entries(self.describe(), rows)


def open_coverage_store(
    where: CoverageStore | str | os.PathLike[str],
) -> CoverageStore:
    """A coverage store from a store, a ``postgresql://`` URL, or a file or directory path.

    Args:
        where: A :class:`CoverageStore` (returned as is); a ``postgresql://`` or
            ``postgres://`` URL (a ``PostgresCoverageStore``); else a SQLite file,
            or a directory (e.g. the raw lane) to hold ``_coverage.sqlite3``.

    Raises:
        ConfigError: When ``where`` is none of these.
    """
    if isinstance(where, CoverageStore):
        return where
    if isinstance(where, str) and where.startswith(("postgresql://", "postgres://")):
        from thalweg_bytewax.coverage.postgres import (  # noqa: PLC0415 - extra `postgres`
            PostgresCoverageStore,
        )

        return PostgresCoverageStore(where)
    if isinstance(where, str | os.PathLike) and os.fspath(where):
        return SqliteCoverageStore(where)
    msg = (
        f"coverage store: expected a CoverageStore, a `postgresql://` URL or a path; got "
        f"{type(where).__name__}"
    )
    raise ConfigError(msg)
