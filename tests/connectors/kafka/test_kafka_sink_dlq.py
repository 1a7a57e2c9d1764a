"""DLQ to a topic: rejects land as Kafka records with Kafka Connect's error headers."""

from __future__ import annotations

from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main

import thalweg_bytewax.operators as twg
from tests.connectors.kafka.kafka_sink_helpers import read_topic
from thalweg_bytewax.codecs import EncodeError, JsonCodec
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSource
from thalweg_bytewax.connectors.kafka.dlq import ERROR_CLASS_BY_REASON, DlqEncoder
from thalweg_bytewax.lanes.dlq import RejectReason
from thalweg_bytewax.testing import produce

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
}


def test_decode_rejects_go_to_a_topic_with_connect_and_dlq_headers(
    kafka_bootstrap: str, make_topic: Any
) -> None:
    src, dlq = make_topic(), make_topic()
    records = [{"value": b'{"id": "a"}', "key": b"k0", "partition": 0}]
    records.append({"value": b"not json", "key": b"k1", "partition": 0,
                    "headers": [("trace", b"t1"), ("empty", None)]})
    records.append({"value": b'{"id": "c"}', "partition": 0})
    produce(kafka_bootstrap, src, records)
    flow = Dataflow("dlq_to_kafka")
    raw = op.input("in", flow, KafkaSource([kafka_bootstrap], [src], tail=False))
    decoded = twg.decode("decode", raw, JsonCodec(SCHEMA))
    op.output("dlq", decoded.rejected, KafkaSink([kafka_bootstrap], dlq, encoder=DlqEncoder()))
    run_main(flow)

    [rec] = read_topic(kafka_bootstrap, dlq)
    h = dict(rec.headers)
    assert rec.value == b"not json" and rec.key == b"k1"  # the original bytes and key
    assert h["__connect.errors.topic"] == src.encode()
    assert h["__connect.errors.partition"] == b"0"
    assert h["__connect.errors.offset"] == b"1"
    assert h["__connect.errors.exception.class.name"] == b"thalweg_bytewax.DecodeError"
    assert h["__connect.errors.exception.message"]
    assert h["__dlq.errors.reason"] == b"decode" and h["__dlq.errors.step"]
    rid = h["__dlq.errors.record_id"]
    assert h["__dlq.errors.value"] == b"raw" and rid is not None and len(rid) == 16
    assert rec.locator == (src, 0, 1)  # the sink's own headers: exactly once on resume


def test_a_reject_without_raw_bytes_carries_its_row_as_json_and_original_headers() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "reason": ["dq", "contract"],
            "rules": [["amount_non_negative@v3", "id_unique@v1"], []],
            "message": ["`amount` is -5; expected >= 0", "bad"],
            "step_id": ["flow.validate", "flow.validate"],
            "_twg_source_topic": ["orders", None],
            "_twg_source_partition": pa.array([2, None], pa.int32()),
            "_twg_source_offset": pa.array([41, None], pa.int64()),
            "row_json": ['{"amount": -5}', None],
            "_twg_source_headers": pa.array(
                [[{"key": "h", "value": b"1"}, {"key": "h", "value": None}], None],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    out = DlqEncoder().encode_batch(batch, topic="dlq")
    assert out.values.to_pylist() == [b'{"amount": -5}', None]
    assert out.headers is not None
    first, second = (dict(h) for h in out.headers)
    assert first["__dlq.errors.rules"] == b"amount_non_negative@v3,id_unique@v1"
    assert first["__dlq.errors.value"] == b"row_json"
    assert first["__connect.errors.exception.class.name"] == b"thalweg_bytewax.QualityRuleViolation"
    assert out.headers[0][-2:] == [("h", b"1"), ("h", None)]  # in order, nulls kept
    assert "__connect.errors.topic" not in second and second["__dlq.errors.value"] == b"none"


def test_a_batch_that_is_no_dlq_batch_is_refused() -> None:
    with pytest.raises(EncodeError, match=r"dlq encoder: batches for `dlq` need the DLQ column"):
        DlqEncoder().encode_batch(pa.RecordBatch.from_pydict({"x": [1]}), topic="dlq")


@pytest.mark.parametrize("reason", list(RejectReason))
def test_every_reject_reason_names_its_own_error_class(reason: RejectReason) -> None:
    # A reason added to RejectReason without a class here fails this test: its rejects
    # would otherwise carry the generic class name tools cannot route on.
    batch = pa.RecordBatch.from_pydict(
        {
            "reason": [reason.value],
            "rules": pa.array([[]], pa.list_(pa.string())),
            "message": ["why"],
            "step_id": ["flow.step"],
        }
    )
    out = DlqEncoder().encode_batch(batch, topic="dlq")
    assert out.headers is not None
    header = dict(out.headers[0])
    assert header["__dlq.errors.reason"] == reason.value.encode()
    assert header["__connect.errors.exception.class.name"] == ERROR_CLASS_BY_REASON[reason].encode()
    assert ERROR_CLASS_BY_REASON[reason] != "thalweg_bytewax.ThalwegError"


def test_the_error_classes_tell_the_reasons_apart() -> None:
    assert set(ERROR_CLASS_BY_REASON) == set(RejectReason)
    assert len(set(ERROR_CLASS_BY_REASON.values())) == len(RejectReason)


def test_a_reason_this_version_does_not_know_keeps_its_code_and_a_generic_class() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"reason": ["later"], "rules": pa.array([[]], pa.list_(pa.string())),
         "message": ["why"], "step_id": ["flow.step"]}
    )
    out = DlqEncoder().encode_batch(batch, topic="dlq")
    assert out.headers is not None
    header = dict(out.headers[0])
    assert header["__dlq.errors.reason"] == b"later"
    assert header["__connect.errors.exception.class.name"] == b"thalweg_bytewax.ThalwegError"
