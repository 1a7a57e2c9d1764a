"""The second-sink gate: a Kafka source written to two sinks needs a raw lane.

Built flows are walked stream by stream (through nested operators), so a source's
sinks are found wherever they hang; the raw lane counts only when it is a Parquet lane
fed straight from the source.
"""

from __future__ import annotations

import logging
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import JsonCodec
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime.gates import check_second_sink, find_unguarded_sources

CODEC = JsonCodec(pa.schema([("id", pa.int64())]))


def kafka_flow(tmp_path: Path, *, raw_lane: str | None = "direct", sinks: int = 2) -> Dataflow:
    flow = Dataflow("orders")
    raw = op.input("kafka_in", flow, KafkaSource(["localhost:1"], ["orders"]))
    if raw_lane == "direct":
        op.output("raw_lane", raw, ParquetSink(tmp_path / "raw"))
    elif raw_lane == "mapped":
        op.output("raw_lane", op.map_value("touch", raw, lambda b: b), ParquetSink(tmp_path / "raw"))
    decoded = twg.decode("decode", raw, CODEC)
    op.output("orders_lane", decoded.ok, ParquetSink(tmp_path / "orders"))
    if sinks >= 2:
        op.output("dlq_lane", decoded.rejected, ParquetSink(tmp_path / "dlq"))
    op.output("stdout", decoded.ok, TestingSink([]))  # not a table sink: never counted
    return flow


def test_two_sinks_without_a_raw_lane_are_refused_saying_why_and_how(tmp_path: Path) -> None:
    flow = kafka_flow(tmp_path, raw_lane=None)
    with pytest.raises(ConfigError) as info:
        check_second_sink(flow)
    text = str(info.value)
    assert text.startswith("flow `orders`: input `orders.kafka_in` feeds 2 sinks")
    assert "`orders.dlq_lane`" in text
    assert "`orders.orders_lane`" in text
    assert "only the raw lane can replay" in text
    assert "allow_without_raw_lane=True" in text
    assert not text.endswith(".")


def test_a_raw_lane_fed_straight_from_the_source_passes(tmp_path: Path) -> None:
    check_second_sink(kafka_flow(tmp_path))
    assert find_unguarded_sources(kafka_flow(tmp_path)) == []


def test_a_lane_behind_an_operator_is_not_a_raw_lane(tmp_path: Path) -> None:
    found = find_unguarded_sources(kafka_flow(tmp_path, raw_lane="mapped"))
    assert [u.step_id for u in found] == ["orders.kafka_in"]
    assert found[0].sinks == ("orders.dlq_lane", "orders.orders_lane", "orders.raw_lane")


def test_one_sink_needs_no_raw_lane(tmp_path: Path) -> None:
    check_second_sink(kafka_flow(tmp_path, raw_lane=None, sinks=1))


def test_the_opt_out_passes_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="thalweg_bytewax.runtime.gates"):
        check_second_sink(kafka_flow(tmp_path, raw_lane=None), allow_without_raw_lane=True)
    assert "runs without a raw lane" in caplog.text


def test_a_replayable_source_is_not_gated(tmp_path: Path) -> None:
    flow = Dataflow("files")
    up = op.input("in", flow, TestingSource[tuple[str, pa.RecordBatch]]([]))
    op.output("a", up, ParquetSink(tmp_path / "a"))
    op.output("b", up, ParquetSink(tmp_path / "b"))
    check_second_sink(flow)


def test_the_orders_flow_passes_on_kafka(tmp_path: Path) -> None:
    from flows.orders import OrdersSettings, build_flow

    settings = OrdersSettings(bootstrap_servers="localhost:1", data_dir=tmp_path)
    check_second_sink(build_flow(settings))
