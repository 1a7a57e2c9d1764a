"""Sinks report the Bytewax step id of their output step in metrics and health."""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

from tests.helpers import raw_batch
from tests.observability.conftest import get, get_json
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.observability import instruments, observe, running_server


def samples(text: str, name: str) -> dict[str, float]:
    """A metric's value per ``step_id`` label, from Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = line[len(name) + 1 : line.index("}")]
            step = dict(kv.split("=", 1) for kv in labels.split(","))["step_id"].strip('"')
            out[step] = float(line.rsplit(" ", 1)[1])
    return out


def test_two_sinks_of_one_class_are_two_series_named_by_their_step_ids(tmp_path: Path) -> None:
    observe(port=0)
    server = running_server()
    assert server is not None
    flow = Dataflow("twosinks")
    batches = [
        ("orders:0", raw_batch("orders", 0, range(7))),
        ("orders:1", raw_batch("orders", 1, range(5))),
    ]
    stream = op.input("in", flow, TestingSource(batches))
    op.output("lane_a", stream, ParquetSink(tmp_path / "a", shards=2))
    part0 = op.filter("orders_0", stream, lambda kv: kv[0] == "orders:0")
    op.output("lane_b", part0, ParquetSink(tmp_path / "b", shards=2))
    run_main(flow)

    text = get(server.url + "/metrics")[1].decode()
    written = samples(text, instruments.SINK_ROWS_WRITTEN.name)
    assert written["twosinks.lane_a"] == 12
    assert written["twosinks.lane_b"] == 7
    assert "parquet sink" not in written
    commits = samples(text, instruments.SINK_COMMIT_DURATION.name + "_count")
    assert {"twosinks.lane_a", "twosinks.lane_b"} <= set(commits)
    _, stats = get_json(server.url + "/stats")
    assert stats["sinks"]["twosinks.lane_a"]["rows_written"] == 12
    assert stats["sinks"]["twosinks.lane_b"]["rows_written"] == 7
    _, tree = get_json(server.url + "/health")
    names = set(tree["components"]["sink"])
    assert any(n.startswith("twosinks.lane_a (parquet sink) #") for n in names), names
    assert any(n.startswith("twosinks.lane_b (parquet sink) #") for n in names), names


def test_a_partition_has_one_step_id(tmp_path: Path) -> None:
    observe()
    part = ParquetSink(tmp_path / "lane", shards=1).build_part("flow.lane", "shard-000", None)
    part.observe_as("flow.lane")  # the same id again: nothing changes
    with pytest.raises(ConfigError, match=r"observed as step `flow.lane`.*`flow.other`"):
        part.observe_as("flow.other")
    part.close()
