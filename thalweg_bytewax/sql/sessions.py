"""The process's transform databases: one DuckDB session per memory limit, shared.

Every SQL node of a process (and every node of a SQL DAG) with the same
``memory_limit_bytes`` runs in one sandboxed session, so the limit bounds them together;
:func:`memory_limit_error` is the error of a run past it, naming the limit and the
remedy.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thalweg_bytewax.sql.bounds import SqlMemoryError, format_bytes
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.syntax import first_line

if TYPE_CHECKING:
    from thalweg_bytewax.udf.function import WasmFunction

__all__ = [
    "DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_NODE_TIMEOUT_SECONDS",
    "functions_session",
    "memory_limit_error",
    "transform_session",
]

DEFAULT_SQL_NODE_TIMEOUT_SECONDS = 60.0
"""The default bound on one run of a SQL node over one batch."""

DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES = 1024 * 1024 * 1024
"""The default memory limit of the transform database (1 GiB), shared by the SQL nodes of
a process (and its worker threads) that keep the default."""


_session_lock = threading.Lock()
_sessions: dict[int, SqlSession] = {}


def transform_session(
    memory_limit_bytes: int = DEFAULT_SQL_NODE_MEMORY_LIMIT_BYTES,
) -> SqlSession:
    """The process's transform database of that memory limit: sandboxed, one thread per query.

    Every SQL node of the process with this ``memory_limit_bytes`` runs here (each node
    on a cursor of its own per thread), so the limit bounds them together; a node
    given another limit gets a database of its own limit. Contracts keep sessions of
    their own. DuckDB runs each query on its caller's thread alone: the workers'
    threads are the parallelism, and a batch-sized query gains nothing from fanning out
    (measured in ``benchmarks/sql.py``).
    """
    with _session_lock:
        session = _sessions.get(memory_limit_bytes)
        if session is None:
            session = _sessions[memory_limit_bytes] = SqlSession(
                DEFAULT_SQL_NODE_TIMEOUT_SECONDS, threads=1, memory_limit_bytes=memory_limit_bytes
            )
        return session


def functions_session(
    memory_limit_bytes: int, functions: Sequence[WasmFunction]
) -> SqlSession | None:
    """A database of its own for SQL that calls ``functions``; None without functions.

    The functions are registered on the database, so SQL calling them cannot run in
    the process's shared :func:`transform_session`; SQL calling none runs there.
    """
    if not functions:
        return None
    return SqlSession(
        DEFAULT_SQL_NODE_TIMEOUT_SECONDS,
        threads=1,
        memory_limit_bytes=memory_limit_bytes,
        functions=functions,
    )


def memory_limit_error(step_id: str, memory_limit_bytes: int, exc: BaseException) -> SqlMemoryError:
    """The error of node ``step_id``'s run past its memory limit: the limit and the remedy."""
    engine = exc.__cause__ if isinstance(exc, SqlMemoryError) and exc.__cause__ else exc
    msg = (
        f"sql `{step_id}`: expected the query to fit in the memory limit of "
        f"{format_bytes(memory_limit_bytes)}; got {first_line(engine)}; raise "
        f"`memory_limit_bytes` (`[sql] memory_limit_mb` in a pipeline file), or make "
        f"the query hold less (smaller batches, fewer groups, no large lists)"
    )
    return SqlMemoryError(msg)
