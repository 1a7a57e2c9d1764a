"""A session's database is opened afresh every RENEW_AFTER_RUNS runs: DuckDB keeps memory
of past joins on a database, and a flow runs its queries for weeks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from thalweg_bytewax.sql import engine
from thalweg_bytewax.sql.engine import SqlSession

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.mark.slow  # starts benchmarks/sql_renewal.py: ~20 s of DuckDB runs
def test_many_joins_on_one_session_keep_its_memory_bounded() -> None:
    # The benchmark runs the join 8,000 times on a session renewed every 1,024 runs (the
    # default) and on one never renewed, and prints each one's heap growth.
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sql_renewal.py"), "--runs", "8000"]
        + ["--rounds", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    grown = {
        m["name"].strip(): float(m["heap"])
        for m in re.finditer(r"round 0 (?P<name>[^:]+): heap \+(?P<heap>[\d.]+) MB", out)
    }
    # Without renewal DuckDB keeps ~1 KB a run (~8 MB here); with it the heap does not
    # grow with the runs.
    assert grown["never renewed"] > 4, out
    assert grown["renewed every 1024"] < 2.5, out
