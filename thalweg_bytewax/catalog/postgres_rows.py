"""The rows a PostgreSQL sink writes and reads back: cast to the table's shape, looked up.

:func:`cast_to_shape` casts a batch to the Arrow types of its table's columns;
:func:`select_record_ids` and :func:`select_key_locators` read which records and keys
the table already holds, so a replayed epoch writes each record once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax import _deps
from thalweg_bytewax.catalog.steps import TableShape
from thalweg_bytewax.errors import SinkTerminalError
from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.typemap import postgres_type

_deps.require("psycopg", extra="postgres")

import psycopg  # noqa: E402 - after the guard that names the extra
from psycopg import sql  # noqa: E402

__all__ = ["KEY_LOOKUP_ERRORS", "cast_to_shape", "select_key_locators", "select_record_ids"]


def cast_to_shape(data: pa.Table, shape: TableShape, target: str) -> pa.Table:
    """Cast each column of ``data`` to the Arrow type of its table column.

    Raises:
        SinkTerminalError: A value does not fit its column's type (named).
    """
    columns = []
    fields = []
    for f, original in zip(data.schema, data.columns, strict=True):
        col = original
        have = shape.column(f.name)
        wanted = have.type if have is not None else f.type
        if not col.type.equals(wanted):
            if isinstance(wanted, pa.ExtensionType) and col.type.equals(wanted.storage_type):
                pass  # written through the storage type, which the driver knows
            else:
                try:
                    col = pc.cast(col, wanted, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    msg = (
                        f"postgres sink `{target}`: column `{f.name}` cannot be written as "
                        f"`{postgres_type(wanted)}`; expected values of `{wanted}`; got "
                        f"`{f.type}` ({exc}); cast the column upstream"
                    )
                    raise SinkTerminalError(msg) from exc
        if isinstance(col.type, pa.ExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], col.type.storage_type)
        columns.append(col)
        fields.append(pa.field(f.name, col.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def select_record_ids(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: MetadataColumns,
    topic: str,
    partition: int,
    first: int,
    last: int,
) -> pa.Table:
    """The ``(offset, record id)`` pairs the table holds for one source offset range."""
    query = sql.SQL(
        "SELECT {o}, {r} FROM {t} WHERE {tp} = %s AND {p} = %s AND {o} BETWEEN %s AND %s"
    ).format(
        o=sql.Identifier(columns.source_offset),
        r=sql.Identifier(columns.record_id),
        t=sql.Identifier(schema, table),
        tp=sql.Identifier(columns.source_topic),
        p=sql.Identifier(columns.source_partition),
    )
    rows = conn.execute(query, (topic, partition, first, last)).fetchall()
    return pa.table(
        {
            columns.source_offset: pa.array([r[0] for r in rows], pa.int64()),
            columns.record_id: pa.array(
                [bytes(r[1]) if r[1] is not None else None for r in rows], pa.binary(16)
            ),
        }
    )


# Rows of keys a lookup sends in one statement.
_KEYS_PER_QUERY = 1000
KEY_LOOKUP_ERRORS = (psycopg.DataError, psycopg.ProgrammingError, TypeError, ValueError)
"""What :func:`select_key_locators` raises for key values it cannot send or compare."""


def select_key_locators(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: MetadataColumns,
    key_columns: Sequence[str],
    keys: Sequence[Sequence[Any]],
) -> pa.Table:
    """The locators of the table's rows of the given keys, each with the key it answers.

    ``keys`` holds one tuple of key values per row asked, in ``key_columns`` order; each
    value is cast to its column's type in the statement. Returns ``_row`` (the index of
    the key in ``keys``), topic, partition and offset for every row of the table with
    one of the keys; a key the table holds no row of has none.
    """
    target = sql.Identifier(schema, table)
    typed = dict(
        conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = %s::regclass AND a.attname = ANY(%s) AND NOT a.attisdropped",
            (target.as_string(conn), list(key_columns)),
        ).fetchall()
    )
    names = [sql.Identifier(k) for k in key_columns]
    row = sql.SQL("(%s::bigint, {})").format(
        sql.SQL(", ").join(sql.SQL("%s::" + typed[k]) for k in key_columns)
    )
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[start : start + _KEYS_PER_QUERY]
        query = sql.SQL(
            "SELECT v.i, t.{tp}, t.{p}, t.{o} FROM (VALUES {rows}) AS v(i, {names}) "
            "JOIN {t} AS t ON {on}"
        ).format(
            tp=sql.Identifier(columns.source_topic),
            p=sql.Identifier(columns.source_partition),
            o=sql.Identifier(columns.source_offset),
            rows=sql.SQL(", ").join([row] * len(chunk)),
            names=sql.SQL(", ").join(names),
            t=target,
            on=sql.SQL(" AND ").join(sql.SQL("t.{k} = v.{k}").format(k=k) for k in names),
        )
        params = [v for i, values in enumerate(chunk, start) for v in (i, *values)]
        found.extend(conn.execute(query, params).fetchall())
    rows, topics, partitions, offsets = zip(*found, strict=True) if found else ((),) * 4
    return pa.table(
        {
            "_row": pa.array(rows, pa.int64()),
            columns.source_topic: pa.array(topics, pa.string()),
            columns.source_partition: pa.array(partitions, pa.int32()),
            columns.source_offset: pa.array(offsets, pa.int64()),
        }
    )
