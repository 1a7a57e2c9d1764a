"""Helpers of the PostgreSQL sink tests: decoded-like batches, and reading a table back.

Shaped for a behaviour suite over every table sink: :func:`batch` builds a decoded batch
of one source partition (payload plus locator and record id), :func:`read_table` reads
the target back as an Arrow table, :func:`record_ids` as the set a crash test compares.
"""

from __future__ import annotations

from collections.abc import Sequence

import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]
import pyarrow as pa
from psycopg import sql

from thalweg_bytewax.records.batches import raw_batch_from_records
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS
from thalweg_bytewax.records.model import Locator, RawRecord

C = DEFAULT_COLUMNS
LOCATOR = [C.source_topic, C.source_partition, C.source_offset, C.record_id]


def batch(
    topic: str,
    partition: int,
    offsets: Sequence[int],
    *,
    tag: str = "v",
    cluster: str = "c",
    extra: dict[str, pa.Array] | None = None,
    amount_type: pa.DataType | None = None,
) -> pa.RecordBatch:
    """Rows ``id = offset``, ``name = <tag><offset>``, ``amount = offset * 10`` plus locator."""
    raw = raw_batch_from_records(
        [
            RawRecord(Locator(topic, partition, o, cluster), b"k", f"{tag}{o}".encode())
            for o in offsets
        ]
    ).select(LOCATOR)
    cols: dict[str, pa.Array] = {
        "id": pa.array(list(offsets), pa.int64()),
        "name": pa.array([f"{tag}{o}" for o in offsets], pa.string()),
        "amount": pa.array([o * 10 for o in offsets], amount_type or pa.int64()),
        **(extra or {}),
    }
    out = raw
    for i, (name, values) in enumerate(cols.items()):
        out = out.add_column(i, name, values)
    return out


def read_table(dsn: str, schema: str, table: str, order_by: str = "id") -> pa.Table:
    """The whole table as Arrow (through ADBC, so types come back as the server has them)."""
    query = sql.SQL("SELECT * FROM {} ORDER BY {}").format(
        sql.Identifier(schema, table), sql.Identifier(order_by)
    )
    with adbc.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(query.as_string(None))
        return cur.fetch_arrow_table()


def record_ids(dsn: str, schema: str, table: str) -> list[bytes]:
    """Every record id the table holds (duplicates kept), sorted."""
    rows = read_table(dsn, schema, table, order_by=C.record_id)
    return sorted(rows.column(C.record_id).to_pylist())


def table_exists(dsn: str, schema: str, table: str) -> bool:
    """Whether the table exists."""
    with adbc.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2",
            (schema, table),
        )
        row = cur.fetchone()
        return bool(row and row[0])
