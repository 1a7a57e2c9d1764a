"""PostgresSink: a table emptied or dropped behind its coverage is refilled, or refused.

The coverage row in ``<schema>._twg_coverage`` outlives a ``TRUNCATE``, a ``DROP
TABLE`` or a ``DELETE`` of a partition's rows. Skipping by it would write nothing and
say nothing. At start the sink checks the table (exists, holds a row of the partition):
without a resume state it drops the stale coverage (and the coverage store's rows) and
refills the table from what the source replays; with one, the source will not replay
the covered offsets, so it refuses naming the remedy.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.connectors.postgres.postgres_helpers import batch, read_table, table_exists
from thalweg_bytewax.connectors.postgres import PostgresSink
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.errors import SinkTerminalError

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]

MakeSink = Callable[..., PostgresSink]
_OPEN: list[Any] = []


@pytest.fixture
def make_sink(pg_dsn: str, pg_schema: str) -> Iterator[MakeSink]:
    def make(**kwargs: Any) -> PostgresSink:
        kwargs.setdefault("schema", pg_schema)
        kwargs.setdefault("shards", 1)
        return PostgresSink(pg_dsn, "orders", **kwargs)

    yield make
    while _OPEN:
        _OPEN.pop().close()


def part(sink: PostgresSink, resume: dict[str, int] | None = None) -> Any:
    built = sink.build_part("flow.pg", "shard-000", resume)
    _OPEN.append(built)
    return built


def execute(dsn: str, statement: sql.Composed | sql.SQL) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


def ids(dsn: str, schema: str) -> list[int]:
    got: list[int] = read_table(dsn, schema, "orders").column("id").to_pylist()
    return got


def run_example(dsn: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/postgres_sink.py"), dsn],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_the_example_refills_a_truncated_and_a_dropped_table(pg_dsn: str) -> None:
    try:
        assert run_example(pg_dsn).startswith("60 rows")
        execute(pg_dsn, sql.SQL("TRUNCATE shop.orders"))
        assert run_example(pg_dsn).startswith("60 rows")
        execute(pg_dsn, sql.SQL("DROP TABLE shop.orders"))
        assert run_example(pg_dsn).startswith("60 rows")
        assert run_example(pg_dsn).startswith("60 rows")  # and a plain rerun adds nothing
    finally:
        execute(pg_dsn, sql.SQL("DROP SCHEMA IF EXISTS shop CASCADE"))


@pytest.mark.parametrize("how", ["truncate", "drop", "delete"])
def test_without_resume_state_the_stale_coverage_goes_and_the_rows_come_back(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str, tmp_path: Path, how: str
) -> None:
    store = SqliteCoverageStore(tmp_path)
    first = part(make_sink(coverage_store=store))
    first.write_batch([batch("t", 0, list(range(10))), batch("t", 1, list(range(5)))])
    first.snapshot()
    first.close()
    target = sql.Identifier(pg_schema, "orders")
    if how == "truncate":
        execute(pg_dsn, sql.SQL("TRUNCATE {}").format(target))
    elif how == "drop":
        execute(pg_dsn, sql.SQL("DROP TABLE {}").format(target))
    else:  # only partition 0's rows
        execute(pg_dsn, sql.SQL("DELETE FROM {} WHERE _twg_source_partition = 0").format(target))
    # The source no longer has offsets 0-4 of t:0 (retention): the table and both
    # coverages hold 5-11 of it, never the lost 0-4.
    again = part(make_sink(coverage_store=store))
    again.write_batch([batch("t", 0, list(range(5, 12))), batch("t", 1, list(range(5)))])
    # The store forgot the lost partitions at once, before the sink's own coverage row
    # went: a crash here leaves it lagging, never claiming what the table lost.
    assert ("t", 0) not in {(e.topic, e.partition) for e in store.entries("flow.pg")}
    again.snapshot()
    assert sorted(ids(pg_dsn, pg_schema)) == sorted([*range(5, 12), *range(5)])
    got = {(e.topic, e.partition): e.coverage.to_list() for e in store.entries("flow.pg")}
    assert got == {("t", 0): [[5, 11]], ("t", 1): [[0, 4]]}
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT topic, partition, ranges::text FROM {} ORDER BY 1, 2").format(
                sql.Identifier(pg_schema, "_twg_coverage")
            )
        ).fetchall()
    assert rows == [("t", 0, "[[5, 11]]"), ("t", 1, "[[0, 4]]")]


def test_with_resume_state_an_emptied_table_is_refused_every_time(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    first = part(make_sink())
    first.write_batch([batch("t", 0, list(range(10)))])
    state = first.snapshot()
    first.close()
    execute(pg_dsn, sql.SQL("TRUNCATE {}").format(sql.Identifier(pg_schema, "orders")))
    for _ in range(2):  # the refusal keeps the coverage: a second start refuses again
        again = part(make_sink(), state)
        with pytest.raises(SinkTerminalError) as info:
            again.write_batch([batch("t", 0, list(range(10, 15)))])
        text = str(info.value)
        assert "holds no row of `t:0`" in text and "0-9" in text
        assert "fresh recovery directory" in text
    assert ids(pg_dsn, pg_schema) == []
    # Deleted on purpose: the statement the refusal names accepts it, and the flow
    # resumes past the covered offsets.
    statement = text.split("deleting the coverage row: ", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(statement.encode())
    accepted = part(make_sink(), state)
    accepted.write_batch([batch("t", 0, list(range(10, 15)))])
    accepted.snapshot()
    assert ids(pg_dsn, pg_schema) == list(range(10, 15))


def test_a_dropped_table_with_resume_state_is_refused_and_not_recreated(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    first = part(make_sink())
    first.write_batch([batch("t", 0, list(range(10)))])
    state = first.snapshot()
    first.close()
    execute(pg_dsn, sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, "orders")))
    again = part(make_sink(), state)
    with pytest.raises(SinkTerminalError, match=r"holds no row of `t:0`"):
        again.write_batch([batch("t", 0, list(range(10, 15)))])
    assert not table_exists(pg_dsn, pg_schema, "orders")


def test_a_table_that_holds_its_rows_is_not_touched(
    make_sink: MakeSink, pg_dsn: str, pg_schema: str
) -> None:
    first = part(make_sink())
    first.write_batch([batch("t", 0, list(range(10)))])
    state = first.snapshot()
    first.close()
    again = part(make_sink(), state)
    again.write_batch([batch("t", 0, list(range(5, 15)))])
    again.snapshot()
    assert ids(pg_dsn, pg_schema) == list(range(15))
