"""``thalweg query`` over a real run of ``flows.orders``: lanes and Iceberg tables as views."""

from __future__ import annotations

import csv
import io
import json
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from bytewax.testing import run_main

from flows.orders import OrdersSettings, build_flow
from tests.fixtures.workers import built_once
from thalweg_bytewax.cli import EXIT_OK, EXIT_USAGE, main
from thalweg_bytewax.cli._lake import lane_files, open_lake
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.lanes.dlq import read_dlq

N = 1_000


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory ``flows.orders`` landed ``N`` sample orders in, read only.

    Landed once per run: on several workers, the first builds it and the others read it.
    """

    def land(root: Path) -> None:
        run_main(build_flow(OrdersSettings(data_dir=root, sample_orders=N)))

    return built_once(tmp_path_factory, "cli-query-lake", land)


def _json_rows(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict]:
    assert main(["query", "--format", "json", *argv]) == EXIT_OK
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_dlq_rows_by_reason_are_what_the_lane_holds(data_dir, capsys):
    rows = _json_rows(
        capsys, "--data-dir", str(data_dir), "select reason, count(*) as n from dlq group by 1"
    )
    lane = Counter(read_dlq(data_dir / "dlq").column("reason").to_pylist())
    assert {r["reason"]: r["n"] for r in rows} == lane
    assert set(lane) == {"decode", "dq"}  # the sample's bad records, both kinds


def test_the_readme_dlq_question_reads_every_rejected_record(data_dir, capsys):
    rows = _json_rows(capsys, "--data-dir", str(data_dir), "select reason, rules, message from dlq")
    lane = read_dlq(data_dir / "dlq")
    assert sorted(r["message"] for r in rows) == sorted(lane.column("message").to_pylist())
    assert all(r["rules"] for r in rows if r["reason"] == "dq")  # failed rule ids, as lists


def test_a_table_joins_its_raw_lane_row_for_row(data_dir, capsys):
    orders = (
        IcebergCatalogConfig(warehouse=str(data_dir / "warehouse"))
        .load()
        .load_table("sales.orders")
        .scan()
        .to_arrow()
    )
    rows = _json_rows(
        capsys,
        "--data-dir",
        str(data_dir),
        "select o.order_id, r._twg_source_partition, r._twg_source_offset "
        "from sales.orders o join raw r using (_twg_record_id)",
    )
    assert len(rows) == orders.num_rows > 0
    assert sorted(r["order_id"] for r in rows) == sorted(orders.column("order_id").to_pylist())
    located = set(
        zip(
            orders.column("_twg_source_partition").to_pylist(),
            orders.column("_twg_source_offset").to_pylist(),
            strict=True,
        )
    )
    assert {(r["_twg_source_partition"], r["_twg_source_offset"]) for r in rows} == located


def test_an_unknown_table_lists_the_views(data_dir, capsys):
    assert main(["query", "--data-dir", str(data_dir), "select * from sales.nope"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "nope" in err
    for view in ("raw", "dlq", "audit", "rules", "sales.orders", "sales.order_lines"):
        assert view in err


def test_only_the_tables_a_query_names_are_read(data_dir):
    lake = open_lake(data_dir)
    try:
        assert list(lake.lanes) == ["audit", "dlq", "raw", "rules"]  # not the warehouse
        assert lake.tables == [
            "sales.order_lines",
            "sales.orders",
            "sales.revenue_per_status_minute",
        ]
        sql = "with t as (select * from sales.orders) select count(*) from t, rules"
        assert lake.load_tables_for(sql) == ["sales.orders"]
    finally:
        lake.con.close()


def test_the_data_dir_comes_from_the_environment_and_memory_is_bounded(
    data_dir, capsys, monkeypatch
):
    monkeypatch.setenv("THALWEG_DATA_DIR", str(data_dir))
    rows = _json_rows(
        capsys,
        "--memory-limit",
        "256MB",
        "select current_setting('memory_limit') as m, (select count(*) from raw) as n",
    )
    assert rows[0]["n"] == N
    assert rows[0]["m"].startswith("244") or "256" in rows[0]["m"]  # DuckDB shows MiB


def test_a_staging_file_is_not_read(data_dir, tmp_path, capsys):
    lake = tmp_path / "lake"  # a copy: the shared one is read by other tests meanwhile
    shutil.copytree(data_dir, lake)
    partition = next(p for p in (lake / "raw" / "orders").iterdir() if p.is_dir())
    staged = partition / ".00000000000000999999-00000000000001000000.parquet"
    staged.write_bytes(b"not yet durable")  # a reader that opened it would fail
    rows = _json_rows(capsys, "--data-dir", str(lake), "select count(*) as n from raw")
    assert rows == [{"n": N}]


def test_the_table_format_says_how_many_rows(data_dir, capsys):
    assert main(["query", "--data-dir", str(data_dir), "select * from raw limit 3"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "_twg_source_offset" in out
    assert out.rstrip().endswith("3 rows")


def test_csv_prints_every_row(data_dir, capsys):
    argv = ["query", "--format", "csv", "--data-dir", str(data_dir), "select * from raw"]
    assert main(argv) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == N + 1  # a header, then every row (more than the table shows)


def test_json_lines_stay_valid_json_with_nan_and_infinities(data_dir, capsys):
    assert main(["query", "--format", "json", "--data-dir", str(data_dir),
                 "select 'nan'::double as n, 'inf'::double as p, ['-inf'::double, 1.5] as l"]) == EXIT_OK  # fmt: skip
    line = capsys.readouterr().out.strip()

    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant} in {line}")

    assert json.loads(line, parse_constant=refuse) == {
        "n": "NaN", "p": "Infinity", "l": ["-Infinity", 1.5]
    }  # fmt: skip


def test_csv_writes_lists_as_json(data_dir, capsys):
    argv = ["query", "--format", "csv", "--data-dir", str(data_dir)]
    assert main([*argv, "select rules from dlq where reason = 'dq' limit 1"]) == EXIT_OK
    header, row = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert header == ["rules"]
    assert json.loads(row[0])[0].rsplit("@", 1)[0] in {"total_range", "currency_pattern"}


def test_without_sql_it_lists_the_views(data_dir, capsys):
    assert main(["query", "--data-dir", str(data_dir)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "dlq  lane" in out
    assert "sales.revenue_per_status_minute  Iceberg table" in out


def test_a_missing_data_dir_says_what_to_do(tmp_path, capsys):
    assert main(["query", "--data-dir", str(tmp_path / "none"), "select 1"]) == EXIT_USAGE
    assert "run a flow first" in capsys.readouterr().err


@pytest.mark.postgres
def test_a_postgres_table_joins_a_lane(data_dir, capsys, monkeypatch, pg_dsn, pg_schema):
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'create table "{pg_schema}".reasons (reason text, meaning text)')
        conn.execute(
            f'insert into "{pg_schema}".reasons values '
            "('decode', 'not Avro of a known schema'), ('dq', 'broke a quality rule')"
        )
    monkeypatch.setenv("THALWEG_POSTGRES_DSN", pg_dsn)
    rows = _json_rows(
        capsys,
        "--data-dir",
        str(data_dir),
        f"select d.reason, p.meaning, count(*) as n from dlq d "
        f"join pg.{pg_schema}.reasons p using (reason) group by 1, 2",
    )
    lane = Counter(read_dlq(data_dir / "dlq").column("reason").to_pylist())
    assert {r["reason"]: r["n"] for r in rows} == lane
    assert {r["meaning"] for r in rows} == {"not Avro of a known schema", "broke a quality rule"}
    assert main(["query", "--data-dir", str(data_dir)]) == EXIT_OK
    assert f"pg.{pg_schema}.reasons  PostgreSQL table" in capsys.readouterr().out


def test_an_unreachable_postgres_is_named_without_its_password(data_dir, capsys):
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dsn = f"postgresql://ada:s3cret-pw@127.0.0.1:{port}/db"
    argv = ["query", "--data-dir", str(data_dir), "--postgres", dsn, "select 1"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "cannot connect to PostgreSQL" in err
    assert "s3cret-pw" not in err


def test_a_lane_nothing_landed_in_is_named(tmp_path, capsys):
    clean = tmp_path / "clean"
    run_main(build_flow(OrdersSettings(data_dir=clean, sample_orders=100)))  # no bad record
    assert main(["query", "--data-dir", str(clean), "select * from dlq"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "nothing landed in `dlq` yet" in err and "sales.orders" in err
    assert main(["query", "--data-dir", str(clean)]) == EXIT_OK
    assert "dlq  nothing landed yet (no view)" in capsys.readouterr().out


def test_a_lane_whose_files_are_gone_reads_as_no_rows_of_its_schema(data_dir, tmp_path, capsys):
    lane = tmp_path / "lake" / "dlq"
    shutil.copytree(data_dir / "dlq", lane)
    for file in lane_files(lane):  # as retention would remove them
        file.unlink()
    rows = _json_rows(
        capsys,
        "--data-dir",
        str(lane.parent),
        "select count(*) as n, count(reason) as r, count(message) as m from dlq",
    )
    assert rows == [{"n": 0, "r": 0, "m": 0}]


@pytest.mark.slow
def test_a_query_over_lanes_alone_does_not_open_the_iceberg_catalog(data_dir):
    """Listing the tables reads the catalog's SQLite file; pyiceberg loads for a table only."""
    probe = (
        "import sys\n"
        "from thalweg_bytewax.cli._query import run_query\n"
        f"lanes = run_query({str(data_dir)!r}, 'select count(*) from dlq')\n"
        "print('pyiceberg.catalog.sql' in sys.modules)\n"
        f"table = run_query({str(data_dir)!r}, 'select count(*) as n from sales.orders')\n"
        "print('pyiceberg.catalog.sql' in sys.modules, table.column('n')[0].as_py() > 0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.splitlines() == ["False", "True True"]
