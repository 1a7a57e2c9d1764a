"""PostgreSQL adapter of the provisioning plan: describe, apply, re-sync by a stored hash.

:func:`describe` reads a live table from ``pg_catalog`` into a
:class:`~thalweg_bytewax.catalog.TableShape` (types through
:func:`~thalweg_bytewax.typemap.arrow_type_of_postgres`); :func:`apply` executes a
:class:`~thalweg_bytewax.catalog.Plan` with identifiers quoted by
:class:`psycopg.sql.Identifier` and types from the fixed DDL vocabulary of
:func:`~thalweg_bytewax.typemap.postgres_type`, comments by ``COMMENT ON COLUMN``.
:func:`sync` does both in one transaction under an advisory lock, and records a hash of
what it provisioned in ``<schema>._twg_tables``: a later sync with the same inputs
finds the hash and plans nothing. The rows a sink writes and reads back (cast to the
table's shape, record ids and key locators already held) live in
:mod:`thalweg_bytewax.catalog.postgres_rows`; this module answers their names too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from thalweg_bytewax import _deps
from thalweg_bytewax.catalog.plan import plan
from thalweg_bytewax.catalog.postgres_rows import (
    KEY_LOOKUP_ERRORS,
    cast_to_shape,
    select_key_locators,
    select_record_ids,
)
from thalweg_bytewax.catalog.steps import (
    AddColumn,
    Column,
    CreateTable,
    Plan,
    SetComment,
    TableShape,
    WidenColumn,
)
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records import DEFAULT_PREFIX
from thalweg_bytewax.typemap import (
    Conversion,
    IdentifierMode,
    arrow_type_of_postgres,
    postgres_type,
    validate_identifier,
)

_deps.require("psycopg", extra="postgres")

import psycopg  # noqa: E402 - after the guard that names the extra
from psycopg import sql  # noqa: E402

__all__ = [
    "KEY_LOOKUP_ERRORS",
    "TABLES_TABLE",
    "apply",
    "connect",
    "cast_to_shape",
    "check_identifier",
    "describe",
    "ensure_schema",
    "has_unique_key",
    "select_key_locators",
    "select_record_ids",
    "sync",
]

logger = logging.getLogger(__name__)

TABLES_TABLE = "_twg_tables"
"""The bookkeeping table of provisioned tables (name, hash of the inputs) per schema."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})

_DESCRIBE = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, a.atthasdef,
       col_description(a.attrelid, a.attnum)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
_UNIQUE_KEYS = """
SELECT array(SELECT a.attname::text FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum = ANY(i.indkey) ORDER BY a.attname)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND i.indisunique AND i.indpred IS NULL
  AND i.indexprs IS NULL
"""


def connect(dsn: str, *, connect_timeout_s: float = 10.0) -> psycopg.Connection[Any]:
    """A new psycopg connection (autocommit off) for describe, DDL and control reads.

    Raises:
        psycopg.Error: The connection failed; callers classify it by SQLSTATE.
    """
    return psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout_s)))


def check_identifier(name: object, what: str, mode: IdentifierMode = "relaxed") -> str:
    """``name`` if it can name a schema, table or column (quoted when relaxed), else raise.

    Raises:
        ConfigError: Naming the identifier and why (see
            :func:`~thalweg_bytewax.typemap.validate_identifier`).
    """
    return validate_identifier(name, mode=mode, what=what, target="postgres")


def ensure_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create ``schema`` and its ``_twg_tables`` bookkeeping table when absent."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (table_name text PRIMARY KEY, shape_hash text NOT "
            "NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        ).format(sql.Identifier(schema, TABLES_TABLE))
    )


def describe(conn: psycopg.Connection[Any], schema: str, table: str) -> TableShape | None:
    """The table's columns in order as a :class:`TableShape`, or None when it is absent.

    A column of a type outside the type map gets the Arrow type ``null``: harmless while
    batches do not carry it, refused by :func:`sync` when they do.
    """
    rows = conn.execute(_DESCRIBE, (schema, table)).fetchall()
    if not rows:
        return None
    columns = []
    for name, type_text, nullable, has_default, comment in rows:
        try:
            arrow = arrow_type_of_postgres(type_text)
        except SchemaError:
            arrow = pa.null()
        columns.append(Column(name, arrow, bool(nullable), comment, bool(has_default)))
    return TableShape(tuple(columns))


def _type_sql(column: Column) -> sql.Composable:
    # DDL text from the type map's fixed vocabulary, never from user input.
    return sql.SQL(postgres_type(column.type))


def apply(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    steps: Plan,
    *,
    primary_key: Sequence[str] = (),
) -> None:
    """Execute a plan's changes on ``conn`` (in the caller's transaction).

    Call :meth:`Plan.raise_if_refused` first. ``primary_key`` becomes the primary key
    of a table the plan creates.
    """
    target = sql.Identifier(schema, table)
    for step in steps.changes:
        if isinstance(step, CreateTable):
            defs = [
                sql.SQL("{} {}{}").format(
                    sql.Identifier(c.name),
                    _type_sql(c),
                    sql.SQL("" if c.nullable else " NOT NULL"),
                )
                for c in step.columns
            ]
            if primary_key:
                defs.append(
                    sql.SQL("PRIMARY KEY ({})").format(
                        sql.SQL(", ").join(map(sql.Identifier, primary_key))
                    )
                )
            conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(defs)))
            for c in step.columns:
                if c.comment:
                    _comment(conn, target, c.name, c.comment)
        elif isinstance(step, AddColumn):
            c = step.column
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    target, sql.Identifier(c.name), _type_sql(c)
                )
            )
            if c.comment:
                _comment(conn, target, c.name, c.comment)
        elif isinstance(step, WidenColumn):
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {}").format(
                    target, sql.Identifier(step.name), sql.SQL(postgres_type(step.new))
                )
            )
        elif isinstance(step, SetComment):
            _comment(conn, target, step.name, step.comment)


def _comment(conn: psycopg.Connection[Any], target: sql.Identifier, name: str, text: str) -> None:
    # COMMENT takes no bind parameters: the text goes in as a quoted literal.
    conn.execute(
        sql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(
            target, sql.Identifier(name), sql.Literal(text)
        )
    )


def has_unique_key(
    conn: psycopg.Connection[Any], schema: str, table: str, keys: Sequence[str]
) -> bool:
    """Whether a unique index (or primary key) on exactly ``keys`` exists on the table."""
    wanted = sorted(keys)
    rows = conn.execute(_UNIQUE_KEYS, (schema, table)).fetchall()
    return any(sorted(r[0]) == wanted for r in rows)


def sync(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    desired: pa.Schema,
    *,
    fingerprint: str,
    comments: Mapping[str, str] = _EMPTY,
    allow_widening: bool = False,
    conversions: Mapping[str, Conversion] = _EMPTY,
    identifiers: IdentifierMode = "strict",
    primary_key: Sequence[str] = (),
    metadata_prefix: str = DEFAULT_PREFIX,
) -> TableShape:
    """Make the table hold batches of ``desired``, in one transaction; return its shape.

    Creates the table when absent (with ``primary_key``), adds new columns with their
    comments, widens only with ``allow_widening``, and refuses anything else before any
    change. The work is serialized across processes by an advisory lock on the table,
    and skipped when ``<schema>._twg_tables`` holds ``fingerprint`` for it already.

    Raises:
        SchemaEvolutionError: A change is refused; nothing was changed.
        ConfigError: An upsert key without a unique index, or a batch column of a type
            outside the type map.
    """
    name = f"{schema}.{table}"
    with conn.transaction():
        ensure_schema(conn, schema)
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))
        current = describe(conn, schema, table)
        _refuse_unmapped(conn, schema, table, current, desired)
        stored = conn.execute(
            sql.SQL("SELECT shape_hash FROM {} WHERE table_name = %s").format(
                sql.Identifier(schema, TABLES_TABLE)
            ),
            (table,),
        ).fetchone()
        if current is not None and stored is not None and stored[0] == fingerprint:
            return current
        steps = plan(
            name,
            current,
            desired,
            target="postgres",
            comments=comments,
            allow_widening=allow_widening,
            conversions=conversions,
            identifiers=identifiers,
            metadata_prefix=metadata_prefix,
        )
        steps.raise_if_refused()
        apply(conn, schema, table, steps, primary_key=primary_key)
        if primary_key and not has_unique_key(conn, schema, table, primary_key):
            msg = (
                f"postgres sink `{name}`: upserts by ({', '.join(primary_key)}) expected a "
                f"unique index or primary key on exactly those columns; got none (add one: "
                f"ALTER TABLE … ADD PRIMARY KEY ({', '.join(primary_key)}))"
            )
            raise ConfigError(msg)
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (table_name, shape_hash) VALUES (%s, %s) ON CONFLICT "
                "(table_name) DO UPDATE SET shape_hash = EXCLUDED.shape_hash, updated_at = now()"
            ).format(sql.Identifier(schema, TABLES_TABLE)),
            (table, fingerprint),
        )
        if steps.changes:
            logger.info(
                "postgres table `%s`: applied %s provisioning steps (%s)",
                name,
                len(steps.changes),
                ", ".join(sorted({type(s).__name__ for s in steps.changes})),
            )
        return steps.result


def _refuse_unmapped(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    current: TableShape | None,
    desired: pa.Schema,
) -> None:
    if current is None:
        return
    for f in desired:
        have = current.column(f.name)
        if have is not None and pa.types.is_null(have.type):
            row = conn.execute(_DESCRIBE, (schema, table)).fetchall()
            text = next((r[1] for r in row if r[0] == f.name), "?")
            msg = (
                f"postgres table `{schema}.{table}`: column `{f.name}` is `{text}`; expected "
                f"a column type thalweg writes (docs/tables.md); got a batch that carries "
                f"it; alter the column to a mapped type or drop it from the batch"
            )
            raise ConfigError(msg)
