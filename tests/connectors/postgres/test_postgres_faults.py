"""PostgresSink under connection faults: cut mid-COPY, server-side termination, an outage,
a connection that stops answering.

The sink talks to PostgreSQL through ``tests/fixtures/proxy.py``, which cuts every
connection on demand or stops forwarding without closing anything. A transient failure retries the epoch's whole transaction from
the buffered rows; the table ends with every row exactly once, or the epoch fails
loudly naming the table and nothing of it is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.connectors.postgres.postgres_helpers import batch, read_table
from tests.fixtures.proxy import Proxy
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.errors import SinkTerminalError
from thalweg_bytewax.runtime.epoch_sink import EpochSinkState


def sink(dsn: str, schema: str, **kwargs: Any) -> PostgresSink:
    kwargs.setdefault("retry_backoff", timedelta(seconds=0.05))
    return PostgresSink(dsn, "orders", schema=schema, shards=1, **kwargs)


def outcome(call: Callable[[], object], guard: float = 60.0) -> BaseException | None:
    """What ``call`` raised (None if nothing), run in a thread so a hang fails, not blocks."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(guard)
    assert not thread.is_alive(), f"still blocked after {guard} s: no bound on a silent server"
    return raised[0] if raised else None


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
        # Back after 0.25 s: the retries (0.1 s, doubling) span 6.3 s.
        timer = threading.Timer(0.25, proxy.refuse, args=(False,))
        timer.start()
        p.snapshot()
        timer.join()
    finally:
        p.close()
    assert ids(pg_dsn, pg_schema) == [0, 1, 2]


def test_a_connection_that_stops_answering_mid_write_fails_the_epoch_loudly_in_bounded_time(
    pg_proxy: tuple[Proxy, str], pg_dsn: str, pg_schema: str
) -> None:
    # The network goes silent mid-COPY: nothing is closed, nothing answers (a dropped
    # route, a stale firewall entry). Each attempt is abandoned at `write_timeout`; past
    # the retries the epoch fails naming the table; the replay writes every row once.
    proxy, dsn = pg_proxy
    settings: dict[str, Any] = {
        "write_timeout": timedelta(seconds=1),
        # The retry connects through the silent network: a connect timeout equal to the
        # write timeout raced it (psycopg's "timeout expired" won at times on a loaded
        # machine). Longer, the attempt is always abandoned at the write timeout.
        "connect_timeout": timedelta(seconds=2),
        "max_retries": 1,
    }
    p = sink(dsn, pg_schema, **settings).build_part("flow.pg", "shard-000", None)
    state: EpochSinkState | None = None
    try:
        p.write_batch([batch("t", 0, list(range(100)))])
        state = p.snapshot()
        p.write_batch([batch("t", 0, list(range(100, 20_100)))])
        proxy.blackhole_after(200_000)
        error = outcome(p.snapshot)
        assert isinstance(error, SinkTerminalError), error
        message = str(error)
        assert f"postgres sink `{pg_schema}.orders`" in message
        assert "did not answer within 1 s" in message
        assert "nothing is lost" in message
        assert p.failed
    finally:
        # The network comes back (the silent connections end): the epoch replays once.
        proxy.cut()
        proxy.blackhole(False)
        p.close()
    assert ids(pg_dsn, pg_schema) == list(range(100))
    again = sink(dsn, pg_schema, **settings).build_part("flow.pg", "shard-000", state)
    try:
        again.write_batch([batch("t", 0, list(range(100, 20_100)))])
        assert outcome(again.snapshot) is None
    finally:
        again.close()
    assert ids(pg_dsn, pg_schema) == list(range(20_100))


def test_both_clients_declare_a_silent_connection_dead_by_the_network_timeout(
    pg_dsn: str, pg_schema: str
) -> None:
    # libpq's keepalives and tcp_user_timeout end a wait on a peer that vanished without
    # closing; the control connection shows what the data connection is given too.
    bounded = sink(pg_dsn, pg_schema, network_timeout=timedelta(seconds=12))
    with bounded.pg.connect_control() as conn:
        options = {o.keyword: o.val for o in conn.pgconn.info}
    assert options[b"keepalives"] == b"1"
    assert options[b"keepalives_idle"] == b"6"
    assert options[b"keepalives_count"] == b"3"
    assert options[b"tcp_user_timeout"] == b"12000"
    sep = "&" if "?" in pg_dsn else "?"
    own = sink(f"{pg_dsn}{sep}keepalives_idle=7", pg_schema)  # the DSN's own value stays
    with own.pg.connect_control() as conn:
        options = {o.keyword: o.val for o in conn.pgconn.info}
    assert options[b"keepalives_idle"] == b"7"
    assert options[b"tcp_user_timeout"] == b"30000"
