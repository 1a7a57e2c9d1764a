"""A sink's own counters (Iceberg commits and expired snapshots, lane files, Kafka
produce counts) reach ``/metrics``, ``/stats`` and ``/health``, not only the three
every sink keeps: an operator watching an Iceberg table's history sees it move."""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from tests.connectors.iceberg.test_iceberg_history import KEEP, run_epochs, table_of
from tests.fixtures.iceberg import IcebergSinkFactory
from tests.helpers import raw_batch
from tests.observability.conftest import get, get_json
from thalweg_bytewax.connectors.flight._partition import FlightSinkStats
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig, IcebergSinkStats
from thalweg_bytewax.connectors.kafka.stats import KafkaSinkStats
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.observability import instruments, observe, running_server
from thalweg_bytewax.runtime.sink_stats import EpochSinkStats


def counter_samples(text: str, step_id: str) -> dict[str, float]:
    """``thalweg_sink_counter_total`` of one step, by counter name, from Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(instruments.SINK_COUNTERS.name + "{"):
            continue
        labels = line[line.index("{") + 1 : line.index("}")]
        pairs = dict(kv.split("=", 1) for kv in labels.split(","))
        if pairs["step_id"].strip('"') == step_id:
            out[pairs["counter"].strip('"')] = float(line.rsplit(" ", 1)[1])
    return out


def test_each_sink_class_names_its_own_counters_and_only_those() -> None:
    assert EpochSinkStats().own_counters() == {}
    iceberg = IcebergSinkStats()
    iceberg.commits, iceberg.snapshots_expired = 3, 2
    assert iceberg.own_counters() == {
        "commits": 3,
        "commit_retries": 0,
        "data_files_written": 0,
        "snapshots_expired": 2,
    }
    kafka = KafkaSinkStats()
    kafka.records_produced = 7
    assert kafka.own_counters()["records_produced"] == 7
    assert set(kafka.own_counters()) == set(KafkaSinkStats.__slots__)  # every one an int
    # The Flight sink's ack lane: its counters, never its gauges (bytes in flight, the
    # deepest burst), which summed over time would read as growth.
    flight = FlightSinkStats()
    flight.lane.batches_sent, flight.lane.unconfirmed_bytes = 4, 1 << 20
    assert flight.own_counters() == {
        "lane_batches_sent": 4,
        "lane_confirms": 0,
        "lane_blocked_sends": 0,
        "lane_reconnects": 0,
    }
    # The common three are their own metrics, never repeated here.
    assert not set(EpochSinkStats.COMMON) & set(iceberg.own_counters())


def test_iceberg_commits_and_expired_snapshots_are_exported(
    iceberg_sink_factory: IcebergSinkFactory, iceberg_catalog_config: IcebergCatalogConfig
) -> None:
    observe(port=0)
    server = running_server()
    assert server is not None
    epochs = KEEP + 16
    expired = run_epochs(iceberg_sink_factory(keep_snapshots=KEEP), epochs)
    assert expired > 0
    kept = len(list(table_of(iceberg_catalog_config).snapshots()))

    text = get(server.url + "/metrics")[1].decode()
    exported = counter_samples(text, "flow.iceberg")
    # One commit an epoch, every snapshot the table does not keep was expired by them.
    assert exported["commits"] == epochs
    assert exported["snapshots_expired"] == expired == epochs - kept
    assert exported["commit_retries"] == 0
    assert exported["data_files_written"] >= epochs
    _, stats = get_json(server.url + "/stats")
    sink = stats["sinks"]["flow.iceberg"]
    assert sink["commits"] == epochs
    assert sink["snapshots_expired"] == expired
    assert sink["epochs_committed"] == epochs
    _, tree = get_json(server.url + "/health")
    (entry,) = [v for k, v in tree["components"]["sink"].items() if k.startswith("flow.iceberg ")]
    assert entry["numbers"]["snapshots_expired"] == expired


def test_lane_files_finalized_match_the_files_on_disk(tmp_path: Path) -> None:
    observe(port=0)
    server = running_server()
    assert server is not None
    flow = Dataflow("lanes")
    batches = [
        ("orders:0", raw_batch("orders", 0, range(7))),
        ("orders:1", raw_batch("orders", 1, range(5))),
        ("orders:2", raw_batch("orders", 2, range(3))),
    ]
    stream = op.input("in", flow, TestingSource(batches))
    op.output("lane", stream, ParquetSink(tmp_path / "lane", shards=2))
    run_main(flow)

    files = [p for p in (tmp_path / "lane").rglob("*.parquet") if not p.name.startswith(".")]
    assert len(files) == 3  # one file per source partition
    text = get(server.url + "/metrics")[1].decode()
    assert counter_samples(text, "lanes.lane") == {"files_finalized": len(files)}
    _, stats = get_json(server.url + "/stats")
    assert stats["sinks"]["lanes.lane"]["files_finalized"] == len(files)
