"""Prepared transform queries: one registration and bind per thread, re-pointed per batch."""

from __future__ import annotations

import pickle
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql.bounds import SqlTimeoutError
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.node import SqlNode, transform_session

SLOW = "SELECT count(*) AS n FROM t, range(100000000) AS r(i) WHERE i % 7 = a"


def rows(first: int, values: list[int]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {
            C.source_topic: ["orders"] * n,
            C.source_partition: pa.array([0] * n, pa.int32()),
            C.source_offset: pa.array(range(first, first + n), pa.int64()),
            C.record_id: pa.array([i.to_bytes(16, "big") for i in range(first, first + n)]),
            "a": pa.array(values, pa.int64()),
        }
    )


def test_a_prepared_query_reads_each_runs_batch_and_follows_a_schema_change() -> None:
    prepared = SqlSession(5).prepare("t", "SELECT a * 2 AS b FROM t WHERE a > $m", params={"m": 1})
    assert prepared.run(pa.table({"a": [1, 2, 3]})).column("b").to_pylist() == [4, 6]
    assert prepared.run(pa.table({"a": [5]})).column("b").to_pylist() == [10]
    widened = prepared.run(pa.table({"a": [1.5, 2.5], "x": ["p", "q"]}))
    assert widened.column("b").to_pylist() == [3.0, 5.0]
    assert widened.schema.field("b").type == pa.float64()
    empty = prepared.run(pa.table({"a": pa.array([], pa.int64())}))
    assert empty.num_rows == 0
    # Pickling drops the per-thread cursors; the copy prepares again on use.
    again = pickle.loads(pickle.dumps(prepared))
    assert again.run(pa.table({"a": [7]})).column("b").to_pylist() == [14]


def test_a_prepared_querys_relation_is_its_own_and_a_bind_error_binds_again() -> None:
    session = SqlSession(5)
    first = session.prepare("t", "SELECT a FROM t")
    other = session.prepare("t", "SELECT a + 100 AS a FROM t")
    assert first.run(pa.table({"a": [1]})).column("a").to_pylist() == [1]
    assert other.run(pa.table({"a": [2]})).column("a").to_pylist() == [102]
    assert first.run(pa.table({"a": [3]})).column("a").to_pylist() == [3]
    with pytest.raises(Exception, match="(?i)not found|does not have a column"):
        first.run(pa.table({"b": [1]}))
    assert first.run(pa.table({"a": [4]})).column("a").to_pylist() == [4]
    # The session's own per-query cursor sees none of the prepared relations.
    with pytest.raises(Exception, match="(?i)does not exist|not found"):
        session.query({}, "SELECT * FROM t")


def test_a_prepared_query_is_bounded_in_time_and_runs_again_after() -> None:
    prepared = SqlSession(5).prepare("t", SLOW, timeout_seconds=0.2)
    with pytest.raises(SqlTimeoutError, match="expected the query to finish within 0.2 s"):
        prepared.run(pa.table({"a": [1]}))
    # The interrupted cursor serves the next batch (an empty one makes the join instant).
    assert prepared.run(pa.table({"a": pa.array([], pa.int64())})).column("n").to_pylist() == [0]


def test_worker_threads_each_run_their_own_cursor_and_may_end() -> None:
    node = SqlNode("threads", "SELECT a FROM input WHERE a % 2 = 0")
    got: dict[int, list[int]] = {}

    def work(k: int) -> None:
        out = [node.run(rows(k * 100, list(range(k, k + 6)))) for _ in range(20)]
        got[k] = sorted({o for b in out for o in b.column(C.source_offset).to_pylist()})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each thread's rows kept their own locator; the ended threads left the process sound.
    assert got == {k: [k * 100 + i for i in range(6) if (k + i) % 2 == 0] for k in range(4)}
    assert node.run(rows(0, [2])).column("a").to_pylist() == [2]


def test_the_time_bound_guard_is_reused_across_batches_and_ends_when_idle() -> None:
    def guards() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "thalweg-sql-watchdog"]

    node = SqlNode("guard", "SELECT a FROM input", timeout_seconds=30)
    seen: list[threading.Thread] = []  # held, so no two share an id
    for i in range(20):
        node.run(rows(i, [i]))
        seen.extend(t for t in guards() if all(t is not s for s in seen))
    assert len(seen) == 1  # one guard thread for every batch, not one started per query
    deadline = time.monotonic() + 5
    while guards() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert guards() == []


def test_batches_of_one_schema_are_registered_parsed_and_bound_once() -> None:
    # What a node saves per batch over a one-off query: the registration, Python-side
    # parse and bind of the query. Each run reads its own batch through the one relation.
    node = SqlNode("fixed", "SELECT a * 2 AS b FROM input WHERE a > 0", timeout_seconds=30)
    session = transform_session()
    batches = [rows(i, [i]) for i in range(1, 61)]
    node.run(batches[0])
    prepared = node._prepared
    assert prepared is not None
    [state] = prepared._threads.values()
    assert state is not None
    cursor, feed, relation = state.cursor, state.feed, state.relation
    for b in batches:
        expected = session.query({"input": b}, "SELECT a * 2 AS b FROM input WHERE a > 0")
        assert node.run(b).column("b").to_pylist() == expected.column("b").to_pylist()
    assert node._prepared is prepared
    [after] = prepared._threads.values()
    assert after is not None
    assert after.cursor is cursor and after.feed is feed and after.relation is relation


@given(
    chunks=st.lists(
        st.lists(st.integers(-50, 50), min_size=0, max_size=30), min_size=1, max_size=6
    ),
    threshold=st.integers(-20, 20),
    widen=st.booleans(),
)
def test_prepared_runs_equal_a_query_registered_per_batch(
    chunks: list[list[int]], threshold: int, widen: bool
) -> None:
    query = "SELECT a, a * 3 AS b FROM input WHERE a > $m"
    node = SqlNode("same", query, params={"m": threshold})
    session = transform_session()
    first = 0
    for i, values in enumerate(chunks):
        b = rows(first, values)
        if widen and i % 2:  # a schema change between batches of one node
            b = b.append_column("extra", pa.array(["x"] * len(values)))
        first += len(values)
        if not values:
            continue
        got = node.run(b)
        want = session.query({"input": b}, query, params={"m": threshold})
        assert got.column("b").to_pylist() == want.column("b").to_pylist()
        offsets = range(first - len(values), first)
        assert got.column(C.source_offset).to_pylist() == [
            o for o, v in zip(offsets, values, strict=True) if v > threshold
        ]


def test_a_sessions_thread_count_is_checked_and_survives_pickling() -> None:
    with pytest.raises(ConfigError, match=r"^sql session: expected a positive `threads`"):
        SqlSession(5, threads=0)
    one = pickle.loads(pickle.dumps(SqlSession(5, threads=1)))
    assert one.threads == 1
    got = one.query({}, "SELECT current_setting('threads') AS n").column("n").to_pylist()
    assert got == [1]
    assert transform_session().threads == 1


def test_batches_past_the_cached_row_numbers_keep_every_rows_locator() -> None:
    node = SqlNode("big", "SELECT a FROM input WHERE a % 1000 = 999")
    for n in (10, 70_000, 200_000, 5):
        out = node.run(rows(1_000, list(range(n))))
        want = [1_000 + a for a in range(n) if a % 1000 == 999]
        assert out.column(C.source_offset).to_pylist() == want


def test_a_pickled_node_prepares_again_in_the_transform_database() -> None:
    node = SqlNode("pickled", "SELECT a FROM input WHERE a > 1")
    assert node.run(rows(0, [1, 2])).column("a").to_pylist() == [2]
    blob = pickle.dumps(node)
    assert len(blob) < 20_000  # neither the row numbers nor DuckDB state travel
    again = pickle.loads(blob)
    out = again.run(rows(5, [3, 0, 4]))
    assert out.column(C.source_offset).to_pylist() == [5, 7]
