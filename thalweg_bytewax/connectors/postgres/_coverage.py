"""Private: the coverage table of a PostgreSQL sink, beside the table it describes.

``<schema>._twg_coverage(sink text, topic text, partition int, ranges jsonb,
updated_at timestamptz)`` holds, per (sink, topic, partition), the source offsets the
sink's table holds as a list of ``[first, last]`` spans (:meth:`OffsetCoverage.to_list`).
A sink updates its rows in the same transaction as the rows it writes, so the coverage
is exactly what the table holds: never ahead, never behind. Rows are read with
``FOR UPDATE`` in that transaction, and the new spans are the union of the stored ones
and the epoch's (never last-write-wins).

The data path runs on an ADBC connection (``$n`` parameters); the control path on
psycopg (``%s`` parameters). Identifiers are quoted by :class:`psycopg.sql.Identifier`.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import sql

from thalweg_bytewax.coverage.spans import OffsetCoverage

__all__ = ["COVERAGE_TABLE", "create_coverage_sql", "dump", "parse", "read_sql", "write_sql"]

COVERAGE_TABLE = "_twg_coverage"
"""The name of the coverage table in the target table's schema."""


def _name(schema: str) -> sql.Composable:
    return sql.Identifier(schema, COVERAGE_TABLE)


def create_coverage_sql(schema: str) -> sql.Composed:
    """``CREATE TABLE IF NOT EXISTS`` for the coverage table of ``schema``."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (sink text NOT NULL, topic text NOT NULL, "
        "partition integer NOT NULL, ranges jsonb NOT NULL, "
        "updated_at timestamptz NOT NULL DEFAULT now(), "
        "PRIMARY KEY (sink, topic, partition))"
    ).format(_name(schema))


def read_sql(schema: str, *, dollar: bool, for_update: bool = False) -> str:
    """The query of one coverage row's spans as JSON text (three parameters).

    ``dollar`` selects ADBC's ``$n`` placeholders, else psycopg's ``%s``.
    """
    marks = [sql.SQL(f"${i}" if dollar else "%s") for i in (1, 2, 3)]
    query = sql.SQL(
        "SELECT ranges::text FROM {} WHERE sink = {} AND topic = {} AND partition = {}{}"
    ).format(_name(schema), *marks, sql.SQL(" FOR UPDATE" if for_update else ""))
    return query.as_string(None)


def write_sql(schema: str) -> str:
    """The upsert of one coverage row: ``$1`` sink, ``$2`` topic, ``$3`` partition, ``$4`` spans."""
    return (
        sql.SQL(
            "INSERT INTO {} (sink, topic, partition, ranges, updated_at) "
            "VALUES ($1, $2, $3, $4::jsonb, now()) ON CONFLICT (sink, topic, partition) "
            "DO UPDATE SET ranges = EXCLUDED.ranges, updated_at = EXCLUDED.updated_at"
        )
        .format(_name(schema))
        .as_string(None)
    )


def parse(rows: list[Any]) -> OffsetCoverage:
    """The coverage in the result of :func:`read_sql` (no row: nothing covered)."""
    if not rows or rows[0][0] is None:
        return OffsetCoverage()
    return OffsetCoverage.from_list(json.loads(rows[0][0]))


def dump(coverage: OffsetCoverage) -> str:
    """The JSON text stored in ``ranges``."""
    return json.dumps(coverage.to_list(), separators=(",", ":"))
