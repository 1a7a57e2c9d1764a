"""Private: an upsert of an epoch's rows into a PostgreSQL table, by key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from psycopg import sql

if TYPE_CHECKING:
    from ._table import PostgresTable

__all__ = ["upsert"]


def upsert(cur: Any, pg: PostgresTable, temp: str, rows: pa.Table) -> None:
    """Insert ``rows`` into ``pg``'s table, replacing the rows of their keys.

    The rows go into the temporary table ``temp`` by binary ``COPY``, then one
    ``INSERT ... ON CONFLICT (<key>) DO UPDATE`` moves the last row of each key over.
    """
    data = _last_per_key(rows, pg.key_columns)
    cur.adbc_ingest(temp, data, mode="create", temporary=True)
    names = [sql.Identifier(n) for n in data.column_names]
    keys = [sql.Identifier(k) for k in pg.key_columns]
    others = [n for n in data.column_names if n not in pg.key_columns]
    action: sql.Composable
    if others:
        action = sql.SQL("DO UPDATE SET {}").format(
            sql.SQL(", ").join(
                sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(n), sql.Identifier(n))
                for n in others
            )
        )
    else:
        action = sql.SQL("DO NOTHING")
    statement = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
        sql.Identifier(pg.schema, pg.table),
        sql.SQL(", ").join(names),
        sql.SQL(", ").join(names),
        sql.Identifier(temp),
        sql.SQL(", ").join(keys),
        action,
    )
    cur.execute(statement.as_string(None))
    cur.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(temp)).as_string(None))


def _last_per_key(data: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The last row of each key (``ON CONFLICT`` may touch a row only once per statement)."""
    ordinal = "__twg_row"
    indexed = data.append_column(ordinal, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    last = indexed.group_by(list(keys), use_threads=False).aggregate([(ordinal, "max")])
    if last.num_rows == data.num_rows:
        return data
    return data.take(np.sort(last.column(f"{ordinal}_max").to_numpy()))
