"""PostgresSink under connection faults: cut mid-COPY, server-side termination, an outage.

The sink talks to PostgreSQL through ``tests/fixtures/proxy.py``, which cuts every
connection on demand. A transient failure retries the epoch's whole transaction from
the buffered rows; the table ends with every row exactly once, or the epoch fails
loudly naming the table and nothing of it is written.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.connectors.postgres.postgres_helpers import batch, read_table
from tests.fixtures.proxy import Proxy
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.errors import SinkTerminalError


def sink(dsn: str, schema: str, **kwargs: Any) -> PostgresSink:
    kwargs.setdefault("retry_backoff", timedelta(seconds=0.05))
    return PostgresSink(dsn, "orders", schema=schema, shards=1, **kwargs)


def ids(dsn: str, schema: str) -> list[int]:
    got: list[int] = read_table(dsn, schema, "orders").column("id").to_pylist()
    return got


def test_a_connection_cut_mid_copy_is_retried_and_every_row_lands_once(
    pg_proxy: tuple[Proxy, str], pg_dsn: str, pg_schema: str
) -> None:
    proxy, dsn = pg_proxy
    p = sink(dsn, pg_schema).build_part("flow.pg", "shard-000", None)
    try:
        p.write_batch([batch("t", 0, list(range(100)))])
        p.snapshot()
        rows = list(range(100, 20_100))
        p.write_batch([batch("t", 0, rows)])
        # Cut once the COPY of the second epoch is well under way (~60 bytes per row).
        proxy.cut_after(200_000)
        p.snapshot()
        assert proxy.cuts >= 1
    finally:
        p.close()
    assert ids(pg_dsn, pg_schema) == list(range(20_100))


def test_a_terminated_backend_is_retried(
    pg_proxy: tuple[Proxy, str], pg_dsn: str, pg_schema: str
) -> None:
    # What a server restart looks like to a live session: SQLSTATE 57P01 admin_shutdown.
    _, dsn = pg_proxy
    p = sink(f"{dsn}?application_name=twg_victim", pg_schema).build_part(
        "flow.pg", "shard-000", None
    )
    try:
        p.write_batch([batch("t", 0, [0, 1])])
        p.snapshot()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'twg_victim'"
            ).fetchall()
        assert killed, "the sink's data connection should be open between epochs"
        p.write_batch([batch("t", 0, [2, 3])])
        p.snapshot()
    finally:
        p.close()
    assert ids(pg_dsn, pg_schema) == [0, 1, 2, 3]


def test_an_outage_longer_than_the_retries_fails_loudly_and_writes_nothing(
    pg_proxy: tuple[Proxy, str], pg_dsn: str, pg_schema: str
) -> None:
    proxy, dsn = pg_proxy
    p = sink(dsn, pg_schema, max_retries=2).build_part("flow.pg", "shard-000", None)
    try:
        p.write_batch([batch("t", 0, [0])])
        p.snapshot()
        p.write_batch([batch("t", 0, [1, 2])])
        proxy.refuse()
        proxy.cut()
        with pytest.raises(
            SinkTerminalError, match=r"postgres sink `.*\.orders`: .* 3 times"
        ) as info:
            p.snapshot()
        assert "nothing is lost" in str(info.value)
        assert p.failed
    finally:
        p.close()
    assert ids(pg_dsn, pg_schema) == [0]


def test_a_server_back_within_the_retries_recovers(
    pg_proxy: tuple[Proxy, str], pg_dsn: str, pg_schema: str
) -> None:
    proxy, dsn = pg_proxy
    p = sink(dsn, pg_schema, max_retries=6, retry_backoff=timedelta(seconds=0.1)).build_part(
        "flow.pg", "shard-000", None
    )
    try:
        p.write_batch([batch("t", 0, [0])])
        p.snapshot()
        p.write_batch([batch("t", 0, [1, 2])])
        proxy.refuse()
        proxy.cut()
        timer = threading.Timer(0.5, proxy.refuse, args=(False,))
        timer.start()
        p.snapshot()
        timer.join()
    finally:
        p.close()
    assert ids(pg_dsn, pg_schema) == [0, 1, 2]
