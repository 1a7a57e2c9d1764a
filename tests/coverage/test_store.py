"""The coverage store: union-merged ranges per (sink, topic, partition), safe under concurrency.

Property tests: whatever order spans are recorded in, and however they are split across
calls, the stored coverage is their union, gaps are exactly the holes between them, and
nothing is ever removed. Concurrency: several processes and threads recording into one
SQLite file (and one PostgreSQL table) at once leave the union of everything recorded.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.store import (
    DEFAULT_FILE_NAME,
    CoverageStore,
    SqliteCoverageStore,
    open_coverage_store,
)
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, SinkTransientError

spans = st.lists(
    st.tuples(st.integers(0, 500), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=12,
)


def offsets_of(span_list: list[tuple[int, int]]) -> set[int]:
    return {o for lo, hi in span_list for o in range(lo, hi + 1)}


def stored(store: CoverageStore, sink: str = "s", key: tuple[str, int] = ("t", 0)) -> OffsetCoverage:
    if isinstance(store, SqliteCoverageStore) and not store.path.exists():
        return OffsetCoverage()
    for e in store.entries(sink):
        if (e.topic, e.partition) == key:
            return e.coverage
    return OffsetCoverage()


@given(batches=st.lists(spans, max_size=6))
def test_recorded_spans_merge_by_union_in_any_split(tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, int]]]) -> None:
    store = SqliteCoverageStore(tmp_path_factory.mktemp("cov") / "c.sqlite3")
    for part in batches:
        store.record("s", {("t", 0): OffsetCoverage(part)})
    everything = [s for part in batches for s in part]
    got = stored(store)
    covered = offsets_of([tuple(s) for s in got.to_list()])  # type: ignore[misc]
    assert covered == offsets_of(everything)
    # Gaps are exactly the holes between the first and last covered offset.
    if covered:
        holes = set(range(min(covered), max(covered) + 1)) - covered
        assert offsets_of(got.gaps()) == holes


@given(first=spans, second=spans)
def test_recording_never_removes_coverage(tmp_path_factory: pytest.TempPathFactory, first: list[tuple[int, int]], second: list[tuple[int, int]]) -> None:
    store = SqliteCoverageStore(tmp_path_factory.mktemp("cov") / "c.sqlite3")
    store.record("s", {("t", 0): OffsetCoverage(first)})
    before = offsets_of(list(stored(store)))
    store.record("s", {("t", 0): OffsetCoverage(second)})
    after = offsets_of(list(stored(store)))
    assert before <= after
    assert after == offsets_of(first) | offsets_of(second)


def test_sinks_topics_and_partitions_are_kept_apart(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path)
    assert store.path == tmp_path / DEFAULT_FILE_NAME
    store.record("a", {("t", 0): OffsetCoverage([(0, 9)]), ("t", 1): OffsetCoverage([(5, 5)])})
    store.record("b", {("t", 0): OffsetCoverage([(100, 109)])})
    rows = [(e.sink, e.topic, e.partition, e.coverage.to_list()) for e in store.entries()]
    assert rows == [
        ("a", "t", 0, [[0, 9]]),
        ("a", "t", 1, [[5, 5]]),
        ("b", "t", 0, [[100, 109]]),
    ]
    assert [e.sink for e in store.entries("b")] == ["b"]
    assert all(e.updated_at is not None and e.updated_at.tzinfo is not None for e in store.entries())


def test_the_store_is_in_wal_mode(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("s", {("t", 0): OffsetCoverage([(0, 0)])})
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(path: str, sink: str, worker: int, rounds: int) -> None:
    store = SqliteCoverageStore(path)
    for i in range(rounds):
        # Interleaved spans: every writer's ranges touch every other writer's.
        lo = (i * 8 + worker) * 10
        store.record(sink, {("t", 0): OffsetCoverage([(lo, lo + 9)]), ("t", 1): OffsetCoverage([(lo, lo)])})


def _expected(workers: int, rounds: int) -> tuple[set[int], set[int]]:
    los = [(i * 8 + w) * 10 for w in range(workers) for i in range(rounds)]
    return {o for lo in los for o in range(lo, lo + 10)}, set(los)


@pytest.mark.slow
def test_concurrent_processes_and_threads_leave_the_union(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite3")
    rounds = 40
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, "s", w, rounds)) for w in range(4)]
    threads = [threading.Thread(target=_writer, args=(path, "s", w, rounds)) for w in range(4, 8)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = SqliteCoverageStore(path)
    want0, want1 = _expected(8, rounds)
    assert offsets_of(list(stored(store, key=("t", 0)))) == want0
    assert offsets_of(list(stored(store, key=("t", 1)))) == want1


def test_a_locked_store_is_a_transient_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("s", {("t", 0): OffsetCoverage([(0, 0)])})
    monkeypatch.setattr("thalweg_bytewax.coverage.store._BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(SinkTransientError, match=r"^coverage store sqlite `.*`: OperationalError"):
            store.record("s", {("t", 0): OffsetCoverage([(1, 1)])})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert stored(store).to_list() == [[0, 0]]


def test_a_foreign_row_is_refused_naming_it(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("s", {("t", 0): OffsetCoverage([(0, 0)])})
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE coverage SET ranges='not json'")
    with pytest.raises(SinkTerminalError, match=r"row `s` `t:0` expected ranges"):
        store.record("s", {("t", 0): OffsetCoverage([(1, 1)])})


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    with pytest.raises(ConfigError, match="`sink` expected a non-empty sink id"):
        store.record("", {("t", 0): OffsetCoverage([(0, 0)])})
    with pytest.raises(ConfigError, match="expected an OffsetCoverage"):
        store.record("s", {("t", 0): [(0, 0)]})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="no such file"):
        SqliteCoverageStore(tmp_path / "missing.sqlite3").entries()
    with pytest.raises(ConfigError, match="expected a CoverageStore"):
        open_coverage_store(42)  # type: ignore[arg-type]
    assert open_coverage_store(store) is store


def test_postgres_store_merges_concurrent_writers(pg_dsn: str, pg_schema: str) -> None:
    from thalweg_bytewax.coverage.postgres import PostgresCoverageStore

    store = PostgresCoverageStore(pg_dsn, table=f"{pg_schema}.coverage")
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        mine = PostgresCoverageStore(pg_dsn, table=f"{pg_schema}.coverage")
        try:
            for i in range(15):
                lo = (i * 4 + worker) * 10
                mine.record(
                    "s", {("t", 0): OffsetCoverage([(lo, lo + 9)]), ("t", 1): OffsetCoverage([(lo, lo)])}
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    want0 = {o for w in range(4) for i in range(15) for o in range((i * 4 + w) * 10, (i * 4 + w) * 10 + 10)}
    want1 = {(i * 4 + w) * 10 for w in range(4) for i in range(15)}
    assert offsets_of(list(stored(store, key=("t", 0)))) == want0
    assert offsets_of(list(stored(store, key=("t", 1)))) == want1


def test_postgres_store_never_echoes_the_password() -> None:
    pytest.importorskip("psycopg")
    from thalweg_bytewax.coverage.postgres import PostgresCoverageStore

    store = PostgresCoverageStore("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1")
    assert "hunter2" not in repr(store)
    with pytest.raises(SinkTransientError) as info:
        store.record("s", {("t", 0): OffsetCoverage([(0, 0)])})
    assert "hunter2" not in str(info.value)
    assert str(info.value).startswith("coverage store postgres `")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_forget_deletes_only_the_named_rows_of_the_sink(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A sink whose target was emptied drops its rows; other sinks and partitions stay.
    store: CoverageStore
    if kind == "sqlite":
        store = SqliteCoverageStore(tmp_path)
    else:
        from thalweg_bytewax.coverage.postgres import PostgresCoverageStore

        schema = request.getfixturevalue("pg_schema")
        store = PostgresCoverageStore(request.getfixturevalue("pg_dsn"), table=f"{schema}.cov")
    spans = OffsetCoverage([(0, 9)])
    store.record("a", {("t", 0): spans, ("t", 1): spans})
    store.record("b", {("t", 0): spans})
    store.forget("a", [("t", 0)])
    left = {(e.sink, e.topic, e.partition) for e in store.entries()}
    assert left == {("a", "t", 1), ("b", "t", 0)}
    store.record("a", {("t", 0): OffsetCoverage([(3, 4)])})
    assert stored(store, "a") == OffsetCoverage([(3, 4)])
