"""A session's database is opened afresh every RENEW_AFTER_RUNS runs: DuckDB keeps memory
of past joins on a database, and a flow runs its queries for weeks."""

from __future__ import annotations

import ctypes

import pyarrow as pa
import pytest

from thalweg_bytewax.sql import engine
from thalweg_bytewax.sql.engine import SqlSession

JOIN = (
    "WITH rates(currency, eur_rate) AS (VALUES ('EUR', 1.0), ('USD', 0.92), ('GBP', 1.17)) "
    "SELECT input.order_id, input.total * rates.eur_rate AS amount_eur "
    "FROM input LEFT JOIN rates ON input.currency = rates.currency ORDER BY order_id"
)


def orders(n: int = 6) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "order_id": list(range(n)),
            "currency": [("EUR", "USD", "GBP")[i % 3] for i in range(n)],
            "total": [float(10 + i) for i in range(n)],
        }
    )


def test_results_are_the_same_across_renewals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RENEW_AFTER_RUNS", 5)
    session = SqlSession(None)
    prepared = session.prepare("input", JOIN)
    first = prepared.run(orders())
    results = [prepared.run(orders()) for _ in range(12)]
    results += [session.query({"input": orders()}, JOIN) for _ in range(6)]
    assert all(r.equals(first) for r in results)
    assert session.generation == 3  # 19 runs: renewed after the 5th, 10th and 15th
    assert first.column("amount_eur").to_pylist()[:3] == [10.0, 11 * 0.92, 12 * 1.17]


def test_a_renewal_gives_each_thread_a_cursor_of_the_new_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "RENEW_AFTER_RUNS", 2)
    session = SqlSession(None)
    before = session.cursor()
    assert session.cursor() is before  # kept between runs
    session.query({"input": orders()}, JOIN)
    session.query({"input": orders()}, JOIN)
    after = session.cursor()
    assert after is not before
    assert after.execute("SELECT 42").fetchall() == [(42,)]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _heap_in_use() -> int:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


@pytest.mark.slow  # ~10 s of DuckDB runs
def test_many_joins_on_one_session_keep_its_memory_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 1,000 runs between renewals here (1,024 by default) to keep the test short.
    monkeypatch.setattr(engine, "RENEW_AFTER_RUNS", 1000)
    runs = 8000
    grown = {}
    for renew in (True, False):
        if not renew:
            monkeypatch.setattr(engine, "RENEW_AFTER_RUNS", runs * 10)
        session = SqlSession(None)
        prepared = session.prepare("input", JOIN)
        batch = orders()
        for _ in range(1000):  # warm up: the first database, the first renewal
            prepared.run(batch)
        start = _heap_in_use()
        for _ in range(runs):
            prepared.run(batch)
        grown[renew] = (_heap_in_use() - start) / 2**20
        del prepared, session
    # Without renewal DuckDB keeps ~1 KB a run (~8 MB here); with it the heap does not grow
    # with the runs.
    assert grown[False] > 4, grown
    assert grown[True] < 2.5, grown
