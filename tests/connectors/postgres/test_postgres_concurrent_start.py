"""Processes starting one PostgresSink on a fresh schema at once all start.

Each process's sink creates the schema and its bookkeeping tables when its first
partition is built, all at the same moment; ``CREATE ... IF NOT EXISTS`` run
concurrently still races in PostgreSQL (a unique violation in the catalog), so the
sink serialises that work. Separate sinks stand for separate processes (the sink's own
lock is per process).
"""

from __future__ import annotations

import threading
import uuid

import psycopg
from psycopg import sql

from thalweg_bytewax.connectors.postgres import PostgresSink


def test_sinks_creating_one_fresh_schema_at_once_all_start(pg_dsn: str) -> None:
    failures: list[BaseException] = []
    schemas = [f"start_{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for schema in schemas:
        start = threading.Barrier(6)

        def build(schema: str = schema, start: threading.Barrier = start) -> None:
            sink = PostgresSink(pg_dsn, "orders", schema=schema, shards=1)
            start.wait()
            try:
                sink.build_part("flow.pg", "shard-000", None).close()
            except BaseException as exc:  # collected, asserted below
                failures.append(exc)

        threads = [threading.Thread(target=build) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    assert not failures, [str(f) for f in failures]
