"""The one shape user SQL is accepted in, and the SQL this package writes around it.

User SQL reaches a connection only as

* a row predicate: exactly one SQL *expression* (parsed on its own by DuckDB's
  expression parser, so ``x > 1; CREATE MACRO ...`` is refused, :func:`check_expression`);
* a scalar query: exactly one ``SELECT`` statement (:func:`check_query`).

Each is then embedded in a query the caller writes with :func:`predicate_sql` or
:func:`scalar_sql`, on its own lines so a trailing ``--`` comment cannot swallow the rest.
Nothing else user SQL might do (DDL, ``SET``, ``ATTACH``, ``PRAGMA``) is a single
expression or a ``SELECT``. It then runs on a session of its own
(:class:`~thalweg_bytewax.sql.engine.SqlSession`).

DuckDB is imported on first use (``_deps.require``), never at import time.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "SqlError",
    "check_expression",
    "check_query",
    "duckdb_type",
    "first_line",
    "predicate_sql",
    "quote_ident",
    "scalar_sql",
]


class SqlError(ConfigError):
    """User SQL is refused: not the one expression or ``SELECT`` expected, or unparsable.

    The message says what was expected.
    """


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
