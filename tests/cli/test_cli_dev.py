"""`thalweg dev broker | produce` and `thalweg lane stats`, as a user runs them."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from thalweg_bytewax.cli import main
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import lane_stats
from thalweg_bytewax.records.batches import raw_batch_from_columns


def write_lane(path: Path, offsets: dict[int, list[int]]) -> None:
    items = [
        (
            f"t:{p}",
            raw_batch_from_columns(
                topic="t", partition=p, offsets=offs, keys=[None] * len(offs), values=[b"v"] * len(offs)
            ),
        )
        for p, offs in offsets.items()
    ]
    flow = Dataflow("write_lane")
    op.output("lane", op.input("in", flow, TestingSource(items)), ParquetSink(path))
    run_main(flow)


def test_lane_stats_prints_records_offsets_and_gaps(tmp_path: Path, capsys) -> None:
    write_lane(tmp_path, {0: [0, 1, 2, 5], 1: [10, 11]})
    assert main(["lane", "stats", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "t:0  4 records, offsets 0..5 (2 offsets not in the lane)",
        "t:1  2 records, offsets 10..11",
        "total: 6 records",
    ]
    stats = lane_stats(tmp_path)
    assert stats.to_pylist()[0] == {
        "topic": "t",
        "partition": 0,
        "records": 4,
        "first_offset": 0,
        "last_offset": 5,
        "missing_offsets": 2,
    }


def test_lane_stats_of_an_empty_lane(tmp_path: Path, capsys) -> None:
    assert lane_stats(tmp_path).num_rows == 0
    assert lane_stats(tmp_path).schema.names[0] == "topic"
    assert main(["lane", "stats", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "total: 0 records\n"


def test_produce_without_a_broker_says_how_to_start_one(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "broker"
    code = main(["dev", "produce", "--address-file", str(missing), "--wait-s", "0.2"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"no broker address in `{missing}`" in err and "thalweg dev broker &" in err


def test_produce_refuses_a_stale_address(tmp_path: Path, capsys) -> None:
    """An address left by a broker that was killed is named, not hung on."""
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stale = tmp_path / "broker"
    stale.write_text(f"127.0.0.1:{port}\n")
    assert main(["dev", "produce", "--address-file", str(stale)]) == 2
    assert f"no broker answers at `127.0.0.1:{port}`" in capsys.readouterr().err


@pytest.mark.slow
def test_broker_publishes_its_address_and_produce_finds_it(tmp_path: Path) -> None:
    thalweg = [sys.executable, "-m", "thalweg_bytewax.cli"]
    broker = subprocess.Popen(
        [*thalweg, "dev", "broker"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        out = subprocess.run(
            [*thalweg, "dev", "produce", "--count", "50"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        address = (tmp_path / ".thalweg" / "broker").read_text().strip()
        assert out.stdout.endswith(f"to `orders` on {address}\n"), out.stdout
    finally:
        broker.terminate()
        broker.wait(timeout=20)
    assert broker.stdout is not None
    with broker.stdout:
        assert f"BOOTSTRAP {address}" in broker.stdout.read()
    assert not (tmp_path / ".thalweg" / "broker").exists()


def test_postgres_without_pgserver_prints_the_pip_line(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "pgserver", None)  # as if it were not installed
    assert main(["dev", "postgres", "--data-dir", "unused"]) == 2
    assert 'pip install "thalweg-bytewax[dev]"' in capsys.readouterr().err


def test_print_dsn_without_a_server_says_how_to_start_one(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "postgres.dsn"
    assert main(["dev", "postgres", "--print-dsn", "--dsn-file", str(missing), "--wait-s", "0.2"]) == 2
    err = capsys.readouterr().err
    assert f"expected a DSN in `{missing}`" in err and "thalweg dev postgres &" in err


def test_postgres_publishes_its_dsn_keeps_its_data_and_stops(open_dir: Path) -> None:
    import psycopg

    tmp_path = open_dir  # every parent traversable: run as root, nothing is widened

    thalweg = [sys.executable, "-m", "thalweg_bytewax.cli"]

    def start(stdout: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*thalweg, "dev", "postgres"],
            cwd=tmp_path,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def dsn() -> str:
        out = subprocess.run(
            [*thalweg, "dev", "postgres", "--print-dsn", "--wait-s", "60"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        )
        return out.stdout.strip()

    server = start(subprocess.PIPE)
    try:
        first = dsn()
        assert first == (tmp_path / ".thalweg" / "postgres.dsn").read_text().strip()
        with psycopg.connect(first, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (7)")
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert server.stdout is not None
    with server.stdout:
        assert f"DSN {first}" in server.stdout.read()
    assert not (tmp_path / ".thalweg" / "postgres.dsn").exists()
    # A second start finds the data of the first in .thalweg/postgres.
    server = start()
    try:
        with psycopg.connect(dsn(), autocommit=True) as conn:
            assert conn.execute("SELECT x FROM kept").fetchall() == [(7,)]
    finally:
        server.terminate()
        server.wait(timeout=60)
