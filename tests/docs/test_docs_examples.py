"""The runnable examples under docs/examples work as written, against a real broker."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from bytewax.testing import run_main

from thalweg_bytewax.testing import produce_sample_orders

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_raw_lane_and_read_lane_examples(
    kafka_bootstrap: str, make_topic, tmp_path: Path, monkeypatch
) -> None:
    topic = make_topic()
    produce_sample_orders(kafka_bootstrap, topic, 500)
    lane = tmp_path / "lane"
    monkeypatch.setenv("THALWEG_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("THALWEG_TOPICS", topic)
    monkeypatch.setenv("THALWEG_TAIL", "0")
    monkeypatch.setenv("THALWEG_RAW_LANE", str(lane))
    module = runpy.run_path(str(ROOT / "docs/examples/raw_lane.py"))
    run_main(module["flow"])
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/read_lane.py")],
        env={**os.environ},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("500 records;")
    per_partition = out.stdout.splitlines()[1:5]
    assert sum(int(line.split()[2]) for line in per_partition) == 500
    assert all(line.split()[0] == topic for line in per_partition)


@pytest.mark.slow
def test_an_example_with_a_bad_setting_names_the_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/raw_lane.py")],
        env={**env, "THALWEG_TAIL": "perhaps"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "ConfigError: `docs.examples.raw_lane` settings: `THALWEG_TAIL`" in out.stderr


@pytest.mark.slow
def test_json_decode_example() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/json_decode.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert "'a-1'" in lines[0] and "'a-3'" in lines[0] and "'total': 2.0" in lines[0]
    assert lines[1] == "1 schema_mismatch json field `total`: expected a number; got '12.5'"
    assert lines[2].startswith("4 malformed json payload is malformed")


@pytest.mark.slow
def test_to_batches_example_lands_rows_of_a_stock_source_in_a_parquet_lane(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/to_batches.py")],
        env={**env, "THALWEG_LANE": str(tmp_path / "lake")},
        capture_output=True,
        text=True,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert "'user_id': 1, 'email': 'ada@example.org', 'plan': 'pro'" in lines[0]
    assert "'user_id': 4" in lines[0] and "'user_id': 3" not in lines[0]
    assert "does not fit the schema: Could not convert 'three'" in lines[1]


@pytest.mark.slow
def test_sql_dag_example_runs_a_shared_node_once_and_fills_interior_and_leaf_lanes(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/sql_dag.py")],
        env={**env, "THALWEG_LANE": str(tmp_path / "lake")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == [
        "clean: [1, 3, 4]",
        "lines: [(1, 'tea'), (3, 'cups'), (3, 'kettle')]",
        "totals: [[{'orders': 3, 'amount': 325.0}]]",
        "runs per node: {'clean': 1, 'big': 1, 'lines': 1, 'totals': 1}",
    ]


@pytest.mark.slow
def test_windows_example_prints_revenue_per_minute_and_one_late_order() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/windows.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(out.stdout.splitlines()) == [
        "NEW 12:00 revenue=10 orders=1",
        "PAID 12:00 revenue=50 orders=2",
        "PAID 12:01 revenue=12 orders=2",
        "PAID 12:02 revenue=1 orders=1",
        "late: 1",
    ]


@pytest.mark.slow
def test_sql_unnest_example(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/sql_unnest.py")],
        env={**os.environ, "THALWEG_LANE": str(tmp_path / "lines")},
        capture_output=True,
        text=True,
        check=True,
    )
    # One line of order 0 (order 1 has none), two of order 40, numbered per order.
    assert out.stdout.splitlines() == ["0 0 0 a 5", "1 40 0 b 14", "1 40 1 b 14"]


@pytest.mark.slow
def test_stock_source_to_tables_example_upserts_into_iceberg_and_postgres(
    tmp_path: Path, pg_dsn: str
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS iot CASCADE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    script = str(ROOT / "docs/examples/stock_source_to_tables.py")
    try:
        out = subprocess.run(
            [sys.executable, script],
            env={**env, "THALWEG_WAREHOUSE": str(tmp_path / "wh"), "THALWEG_POSTGRES_DSN": pg_dsn},
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS iot CASCADE")
    assert out.stdout.splitlines() == [
        "iceberg readings: 30 rows; reading 4 is 99.0",
        "iceberg per_minute: 15 windows, 31 readings",
        "postgres readings: 30 rows; hottest 99.0",
        "postgres per_minute: 15 windows, 31 readings",
    ]
    assert out.stderr.count("rows carry no source locator") == 4
    skipped = subprocess.run(
        [sys.executable, script],
        env={**env, "THALWEG_WAREHOUSE": str(tmp_path / "wh2")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert skipped.stdout.splitlines()[0].startswith("note: THALWEG_POSTGRES_DSN is not set")


@pytest.mark.slow
def test_files_example_lands_good_rows_and_rejects_bad_ones(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/files.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == [
        "orders: [1, 3, 4]",
        "rejected: a.csv row 1",
        "rejected: b.ndjson row 1",
    ]


@pytest.mark.slow
def test_arrow_ipc_example_writes_maps_and_reads_back_every_row(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/arrow_ipc.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == [
        "another process mapped 4 files: 2000 rows",
        "lane rows: 2000 in 4 partitions",
    ]
