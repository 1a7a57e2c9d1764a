"""The time and memory bounds of a query on a SQL session, and what crossing them raises.

Every session query runs under a time bound: a watchdog thread calls
``cursor.interrupt()`` once the bound passes, and :func:`run_bounded` raises
:class:`SqlTimeoutError`. The thread runs while queries are armed, and ends half a
second after the last.

Every session is bounded in memory too (its database's ``memory_limit``, no temporary
directory, see :class:`~thalweg_bytewax.sql.engine.SqlSession`): a query that needs more
fails with :class:`SqlMemoryError` instead of growing the process or spilling to disk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError, ThalwegError
from thalweg_bytewax.sql._watchdog import Watchdog
from thalweg_bytewax.sql.syntax import first_line

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "MIN_MEMORY_LIMIT_BYTES",
    "SqlMemoryError",
    "SqlTimeoutError",
    "check_memory_limit",
    "engine_errors",
    "format_bytes",
    "run_bounded",
]


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


_watchdog = Watchdog()


def run_bounded(
    cur: Any, bound: float | None, run: Callable[[], pa.Table], memory_limit_bytes: int
) -> pa.Table:
    """``run()`` with ``cur`` interrupted once ``bound`` seconds pass.

    Raises:
        SqlTimeoutError: When the bound passed and the query was interrupted.
        SqlMemoryError: When the query needed more than ``memory_limit_bytes``.
    """
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
