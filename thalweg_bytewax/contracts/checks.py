"""Static checks of rules: patterns compile, SQL has the one accepted shape and binds.

Run when a contract is loaded and when a rule set is built, so that a bad rule is
refused before any record is judged. SQL is parsed and bound by
:mod:`thalweg_bytewax.sql` on a session of the caller's (a fresh one when none is
given), never on a connection another contract uses; DuckDB is imported only when a
rule carries SQL.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.contracts.spec import ContractError
from thalweg_bytewax.sql.bounds import engine_errors
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.syntax import (
    SqlError,
    check_expression,
    check_query,
    first_line,
    predicate_sql,
    scalar_sql,
)

__all__ = [
    "BATCH_TABLE",
    "DEFAULT_SQL_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_TIMEOUT_SECONDS",
    "binding_session",
    "check_pattern",
    "check_sql",
    "check_sql_shape",
]

BATCH_TABLE = "batch"
"""The table name a rule's SQL sees the batch under."""

DEFAULT_SQL_TIMEOUT_SECONDS = 1.0
"""Time bound of one SQL query of a rule set over one batch. A predicate over a
50,000-row batch takes single-digit milliseconds (docs/benchmarks.md), so one second is
two orders of magnitude of headroom; a rule over ``range(2e7)`` (~3 s) is cut off."""


DEFAULT_SQL_MEMORY_LIMIT_BYTES = 256 * 1024 * 1024
"""Memory limit of a rule set's DuckDB database (256 MiB), shared by its queries. A rule
over a 50,000-row batch holds a few MiB; DuckDB's own default would be 80 % of RAM per
rule set, which one metric such as ``count(DISTINCT ...)`` over ``range(3e8)`` reaches
well inside its time bound."""


def binding_session() -> SqlSession:
    """A fresh session to bind one contract's SQL on (DuckDB opens on its first query)."""
    return SqlSession(
        DEFAULT_SQL_TIMEOUT_SECONDS, memory_limit_bytes=DEFAULT_SQL_MEMORY_LIMIT_BYTES
    )


def check_pattern(pattern: str) -> None:
    """Compile ``pattern`` with the RE2 engine the evaluation uses.

    Raises:
        ContractError: When the pattern does not compile.
    """
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = f"pattern {pattern!r} does not compile: {exc}"
        raise ContractError(msg) from exc


def check_sql_shape(expression: str, *, scalar: bool = False) -> None:
    """Refuse SQL that is not one expression (a predicate) or one ``SELECT`` (``scalar``).

    Raises:
        ContractError: Naming what was expected.
    """
    try:
        if scalar:
            check_query(expression)
        else:
            check_expression(expression)
    except SqlError as exc:
        raise ContractError(str(exc)) from exc


def _is_metric_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def check_sql(
    expression: str,
    schema: pa.Schema,
    *,
    scalar: bool = False,
    session: SqlSession | None = None,
) -> None:
    """Check a SQL predicate (or scalar batch query) and bind it against ``schema``.

    A predicate must be exactly one expression yielding one value per row (no
    aggregate); a scalar query exactly one ``SELECT`` yielding one numeric or boolean
    column. Binding runs on ``session`` (a fresh one when omitted), never on a
    connection another contract uses.

    Raises:
        ContractError: When it has the wrong shape, or DuckDB cannot parse or bind it
            (e.g. a missing column).
    """
    check_sql_shape(expression, scalar=scalar)
    box = session or binding_session()
    empty = schema.empty_table()
    try:
        if scalar:
            result = box.query({BATCH_TABLE: empty}, f"{scalar_sql(expression)} LIMIT 0")
        else:
            result = box.query(
                {BATCH_TABLE: empty},
                f"SELECT {predicate_sql(expression)} AS ok FROM {BATCH_TABLE}",  # noqa: S608
            )
    except engine_errors() as exc:
        msg = f"SQL {expression!r} is invalid: {first_line(exc)}"
        raise ContractError(msg) from exc
    if scalar and (result.num_columns != 1 or not _is_metric_type(result.schema.field(0).type)):
        got = [f"{f.name} {f.type}" for f in result.schema]
        msg = f"SQL {expression!r}: expected one numeric or boolean column; got {got!r}"
        raise ContractError(msg)
    if not scalar and (result.num_columns != 1 or result.num_rows != 0):
        msg = (
            f"SQL {expression!r}: expected a row predicate (one value per row); got an "
            "aggregate or a set of values; use a `sql` metric for whole-batch checks"
        )
        raise ContractError(msg)
