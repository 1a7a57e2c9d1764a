"""Recovery plans: the raw lane's coverage minus a sink's, in a window; the retention guard.

Unit and property tests over a real SQLite coverage store, then the guard through
``thalweg recover`` on the orders flow: a raw lane file removed (retention) makes
recovery refuse, naming the topic, partition and offsets, before anything is written;
a window narrowed to what the lane holds is replayed.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from bytewax.testing import run_main
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.cli import main
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.recovery_plan import (
    RecoveryPlan,
    check_lane_rows,
    check_retention,
    parse_offsets,
    plan_recovery,
)
from thalweg_bytewax.coverage.store import SqliteCoverageStore
from thalweg_bytewax.errors import ConfigError, SourceError

RAW, SINK = "f.raw", "f.sink"
spans = st.lists(
    st.tuples(st.integers(0, 300), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)


def offsets_of(cov: OffsetCoverage) -> set[int]:
    return {o for lo, hi in cov.spans for o in range(lo, hi + 1)}


def test_a_sink_lacks_the_raw_lanes_coverage_minus_its_own(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path)
    store.record(RAW, {("t", 0): OffsetCoverage([(0, 99)]), ("t", 1): OffsetCoverage([(0, 9)])})
    store.record(SINK, {("t", 0): OffsetCoverage([(0, 39), (60, 79)])})
    plan = plan_recovery(store, SINK, raw_lane=RAW, held={})
    assert plan.missing == {
        ("t", 0): OffsetCoverage([(40, 59), (80, 99)]),
        ("t", 1): OffsetCoverage([(0, 9)]),  # no row of the sink: it lacks everything
    }
    assert plan.offsets == 50
    assert "t:0 40..59, 80..99 (40 offsets)" in plan.describe()
    windowed = plan_recovery(
        store, SINK, raw_lane=RAW, held={}, start=parse_offsets("50", "--from"),
        end=parse_offsets("t:0=85,t:1=60", "--to"), only=("t", None),
    )
    assert windowed.missing == {("t", 0): OffsetCoverage([(50, 59), (80, 85)])}
    one = plan_recovery(store, SINK, raw_lane=RAW, held={}, only=("t", 1))
    assert list(one.missing) == [("t", 1)]


def test_without_raw_lane_coverage_the_lanes_files_stand_for_it(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path)
    store.record(SINK, {("t", 0): OffsetCoverage([(0, 9)])})
    held = {("t", 0): OffsetCoverage([(0, 29)])}
    plan = plan_recovery(store, SINK, raw_lane=RAW, held=held)
    assert plan.missing == {("t", 0): OffsetCoverage([(10, 29)])}


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    store = SqliteCoverageStore(tmp_path)
    store.record(RAW, {("t", 0): OffsetCoverage([(0, 9)])})
    with pytest.raises(ConfigError, match=r"got the raw lane itself"):
        plan_recovery(store, RAW, raw_lane=RAW, held={})
    with pytest.raises(ConfigError, match=r"`--from` <= `--to`; got 8 > 3"):
        plan_recovery(store, SINK, raw_lane=RAW, held={}, start={None: 8}, end={None: 3})
    with pytest.raises(ConfigError, match=r"`--to` expected `N` or"):
        parse_offsets("t:x=3", "--to")


def test_the_retention_guard_names_each_partition_and_the_offsets_gone() -> None:
    plan = RecoveryPlan(SINK, {("t", 0): OffsetCoverage([(40, 99)]), ("t", 1): OffsetCoverage([(0, 9)])})
    held = {("t", 0): OffsetCoverage([(0, 49), (70, 200)]), ("t", 1): OffsetCoverage([(0, 9)])}
    with pytest.raises(SourceError) as caught:
        check_retention(plan, held, lane="lake/raw")
    text = str(caught.value)
    assert "raw lane `lake/raw` no longer holds what sink `f.sink` is missing" in text
    assert "`t:0` offsets 50..69 (20 offsets)" in text
    assert "t:1" not in text
    check_retention(plan, {**held, ("t", 0): OffsetCoverage([(0, 99)])}, lane="lake/raw")


@given(raw=spans, sink=spans, lo=st.integers(0, 350), width=st.integers(0, 350))
def test_a_plan_is_exactly_what_the_window_of_the_raw_lane_lacks_in_the_sink(
    tmp_path_factory: pytest.TempPathFactory,
    raw: list[tuple[int, int]],
    sink: list[tuple[int, int]],
    lo: int,
    width: int,
) -> None:
    store = SqliteCoverageStore(tmp_path_factory.mktemp("plan"))
    store.record("f.other", {("t", 9): OffsetCoverage([(0, 0)])})  # the store exists
    store.record(RAW, {("t", 0): OffsetCoverage(raw)})
    store.record(SINK, {("t", 0): OffsetCoverage(sink)})
    plan = plan_recovery(store, SINK, raw_lane=RAW, held={}, start={None: lo}, end={None: lo + width})
    got = offsets_of(plan.missing.get(("t", 0), OffsetCoverage()))
    window = set(range(lo, lo + width + 1))
    assert got == (offsets_of(OffsetCoverage(raw)) & window) - offsets_of(OffsetCoverage(sink))


def run_orders_without_its_sink(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orders flow over 400 sample orders with its orders output down."""
    monkeypatch.setenv("THALWEG_DATA_DIR", str(data))
    monkeypatch.setenv("THALWEG_SAMPLE_ORDERS", "400")
    monkeypatch.delenv("THALWEG_BOOTSTRAP_SERVERS", raising=False)
    from flows.orders import OrdersSettings, build_flow
    from thalweg_bytewax.dev._orders_sample import SampleOrdersSource

    source = SampleOrdersSource(400, topic="orders", batch_size=25)  # 4 files a partition
    flow = build_flow(OrdersSettings.load(), source=source)
    flow.substeps[:] = [s for s in flow.substeps if s.step_id != "orders.ice_orders"]
    run_main(flow, epoch_interval=timedelta(0))


def orders_table(data: Path) -> pa.Table | None:
    """The orders flow's Iceberg `orders` table under `data`, None when never created."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

    catalog = IcebergCatalogConfig(warehouse=str(data / "warehouse")).load()
    try:
        return catalog.load_table("sales.orders").scan().to_arrow()
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


@pytest.mark.heavy
def test_recover_refuses_a_range_the_raw_lane_no_longer_holds_then_replays_a_held_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    run_orders_without_its_sink(data, monkeypatch)
    files = sorted((data / "raw").glob("orders/0/*.parquet"))
    assert files, "the sample writes partition 0"
    gone = files[0]
    first, last = (int(x) for x in gone.stem.split("-"))
    gone.unlink()  # a retention policy removed the oldest file
    argv = ["recover", "flows.orders", "--sink", "ice_orders", "--no-progress", "--epoch-s", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"`orders:0` offsets {first}..{last}" in err
    assert "no longer holds what sink `orders.ice_orders` is missing" in err
    before = orders_table(data)
    assert before is None or before.num_rows == 0
    # Narrowed to what the lane still holds, it replays.
    assert main([*argv, "--topic", "orders", "--partition", "0", "--from", str(last + 1)]) == 0
    out = capsys.readouterr().out
    assert "recovered" in out
    table = orders_table(data)
    assert table is not None
    table = table.select(["_twg_source_partition", "_twg_source_offset"])
    assert table.num_rows > 0
    assert set(table.column(0).to_pylist()) == {0}
    assert min(table.column(1).to_pylist()) > last


@pytest.mark.slow
def test_recover_shows_a_progress_bar_on_a_terminal_and_none_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    run_orders_without_its_sink(data, monkeypatch)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "THALWEG_DATA_DIR": str(data)}
    argv = [sys.executable, "-m", "thalweg_bytewax.cli", "recover", "flows.orders"]
    argv += ["--sink", "ice_orders", "--epoch-s", "0", "--to", "40"]
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(
            argv, env=env, cwd=root, stdout=subprocess.PIPE, stderr=terminal, timeout=120
        )
    finally:
        os.close(terminal)
    shown = b""
    while select.select([controller], [], [], 0.2)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert proc.returncode == 0, shown[-2000:]
    assert b"100%" in shown, shown[-2000:]
    # Not a terminal: no bar, only the plan and the result on stdout.
    quiet = subprocess.run(
        [*argv[:-2], "--to", "80"], env=env, cwd=root, capture_output=True, timeout=120
    )
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert b"%" not in quiet.stderr
    assert b"recovered" in quiet.stdout


@pytest.mark.heavy
def test_recover_refuses_a_lane_file_named_for_offsets_its_rows_do_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    run_orders_without_its_sink(data, monkeypatch)
    target = sorted((data / "raw").glob("orders/0/*.parquet"))[1]
    first, last = (int(x) for x in target.stem.split("-"))
    rows = pq.read_table(target)
    kept = rows.filter(pa.compute.less(rows.column("_twg_source_offset"), first + 9))
    pq.write_table(kept, target)  # the name still claims first..last
    argv = ["recover", "flows.orders", "--sink", "ice_orders", "--no-progress", "--epoch-s", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"file `{target.name}` lacks {first + 9}..{last}" in err
    assert "Nothing was replayed" in err and "--allow-holes" in err
    before = orders_table(data)
    assert before is None or before.num_rows == 0
    # Accepted as holes, the rest is replayed and the report is what the table holds.
    assert main([*argv, "--allow-holes"]) == 0
    out = capsys.readouterr().out
    store = SqliteCoverageStore(data / "raw")
    held = {(e.topic, e.partition): e.coverage for e in store.entries("orders.ice_orders")}
    raw = {(e.topic, e.partition): e.coverage for e in store.entries("orders.raw_lane")}
    lost = last - first - 8
    assert f"{lost:,} of them hold no record in the lane" in out
    landed = sum(
        len(offsets_of(held.get(k, OffsetCoverage())) & offsets_of(cov)) for k, cov in raw.items()
    )
    assert f"recovered {landed:,} offsets" in out
    assert landed == sum(cov.size for cov in raw.values()) - lost


@pytest.mark.heavy
def test_recover_reports_what_the_sinks_coverage_holds_not_what_it_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The plan is read from another store than the one the sink records into: the
    # replay lands, but nothing says so where recovery looks. Before, it printed
    # "recovered <plan>" and exited 0, and every rerun did the same.
    data = tmp_path / "data"
    run_orders_without_its_sink(data, monkeypatch)
    elsewhere = tmp_path / "elsewhere.sqlite3"
    SqliteCoverageStore(elsewhere).record("other", {("x", 0): OffsetCoverage([(0, 0)])})
    argv = ["recover", "flows.orders", "--sink", "ice_orders", "--no-progress", "--epoch-s", "0"]
    assert main([*argv, "--store", str(elsewhere)]) == 1
    captured = capsys.readouterr()
    assert "recovered 0 offsets" in captured.out
    assert "still lacks 400 of the planned offsets" in captured.err
    assert "`coverage_store=`" in captured.err


def test_the_lane_check_finds_offsets_a_file_is_named_for_and_holds_no_row_of(
    tmp_path: Path,
) -> None:
    # One epoch's rows 0-9 and 20-29 of t:0 (10-19 went to another shard and were
    # refused there): the lane names the file 0-29.
    from tests.helpers import raw_batch, run_into
    from thalweg_bytewax.connectors.parquet import ParquetSink
    from thalweg_bytewax.connectors.raw_lane import lane_held_offsets, lane_rows_missing

    run_into(
        [("t:0", pa.concat_batches([raw_batch("t", 0, range(10)), raw_batch("t", 0, range(20, 30))]))],
        ParquetSink(tmp_path),
    )
    held = lane_held_offsets(tmp_path)
    assert held == {("t", 0): OffsetCoverage([(0, 29)])}
    missing = lane_rows_missing(tmp_path, held)
    [(name, absent)] = missing[("t", 0)]
    assert name.endswith("00000000000000000029.parquet")
    assert absent == OffsetCoverage([(10, 19)])
    assert lane_rows_missing(tmp_path, {("t", 0): OffsetCoverage([(20, 29)])}) == {}
    plan = RecoveryPlan("f.sink", {("t", 0): OffsetCoverage([(0, 29)])})
    with pytest.raises(SourceError, match=r"`t:0` 10 offsets \(file `.*` lacks 10\.\.19\)"):
        check_lane_rows(plan, missing, lane=str(tmp_path))
    accepted = check_lane_rows(plan, missing, lane=str(tmp_path), allow_holes=True)
    assert accepted == {("t", 0): OffsetCoverage([(10, 19)])}
