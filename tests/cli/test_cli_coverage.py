"""`thalweg coverage` and `thalweg check`: ranges, gaps and lag, readable and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from thalweg_bytewax.cli import main
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.store import SqliteCoverageStore


def filled(tmp_path: Path) -> Path:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("f.raw_lane", {("orders", 0): OffsetCoverage([(0, 99)])})
    store.record("f.orders", {("orders", 0): OffsetCoverage([(0, 39), (60, 79)])})
    return store.path


def test_json_lists_ranges_gaps_and_lag_behind_the_raw_lane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = filled(tmp_path)
    assert main(["coverage", str(path), "--raw-lane", "f.raw_lane", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["sink"]: r for r in out["partitions"]}
    orders = rows["f.orders"]
    assert orders["ranges"] == [[0, 39], [60, 79]]
    assert orders["gaps"] == [[40, 59]]
    assert orders["covered"] == 60
    assert orders["behind_raw"] == 40
    assert orders["missing_vs_raw"] == [[40, 59], [80, 99]]
    assert "behind_raw" not in rows["f.raw_lane"]


def test_the_readable_report_names_each_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = filled(tmp_path)
    assert main(["coverage", str(path), "--sink", "f.orders", "--raw-lane", "f.raw_lane"]) == 0
    out = capsys.readouterr().out
    assert "f.orders  orders:0  covers 0..39, 60..79; 1 gaps; 40 offsets behind the raw lane" in out
    assert "gap 40..59 (20 offsets)" in out


def test_an_unknown_raw_lane_or_store_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = filled(tmp_path)
    assert main(["coverage", str(path), "--raw-lane", "nope"]) == 2
    assert "raw lane `nope` expected a sink" in capsys.readouterr().err
    assert main(["coverage", str(tmp_path / "missing.sqlite3")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_lag_against_the_source_high_watermark(
    tmp_path: Path, kafka_bootstrap: str, make_topic, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = make_topic()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(30):
        producer.produce(topic, value=b"x%d" % i, partition=0)
    producer.flush(10)
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record("f.orders", {(topic, 0): OffsetCoverage([(0, 9)])})
    assert main(["coverage", str(store.path), "--bootstrap", kafka_bootstrap, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["partitions"][0]
    assert row["high_watermark"] == 30
    assert row["behind_source"] == 20
    assert row["missing_vs_source"] == [[10, 29]]


def test_check_runs_the_second_sink_gate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "tests.runtime.gate_flows:unguarded"]) == 2
    assert "no raw lane" in capsys.readouterr().err
    assert main(["check", "tests.runtime.gate_flows:unguarded", "--allow-without-raw-lane"]) == 0
    assert main(["check", "tests.runtime.gate_flows:guarded"]) == 0
    assert "passes the build-time gates" in capsys.readouterr().out


def test_a_partition_the_sink_never_recorded_counts_whole_behind_the_raw_lane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = filled(tmp_path)
    SqliteCoverageStore(path).record("f.raw_lane", {("orders", 1): OffsetCoverage([(0, 49)])})
    assert main(["coverage", str(path), "--raw-lane", "f.raw_lane", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {(r["sink"], r["partition"]): r for r in out["partitions"]}
    never = rows[("f.orders", 1)]
    assert never["behind_raw"] == 50
    assert never["missing_vs_raw"] == [[0, 49]]
    assert never["covered"] == 0 and never["updated_at"] is None
    assert rows[("f.orders", 0)]["behind_raw"] == 40
    assert main(["coverage", str(path), "--raw-lane", "f.raw_lane"]) == 0
    assert "orders:1" in capsys.readouterr().out
