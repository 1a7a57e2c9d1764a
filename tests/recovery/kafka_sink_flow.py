"""A flow for the KafkaSink kill-and-resume test: Kafka -> decode (JSON) -> KafkaSink.

Run by ``tests/recovery/test_kafka_sink_crash.py`` under ``python -m bytewax.run`` with
``THALWEG_BOOTSTRAP_SERVERS``, ``THALWEG_TOPICS`` (the input), ``THALWEG_OUTPUT_TOPIC``,
``THALWEG_BATCH_SIZE``, ``THALWEG_MAX_RECORDS_PER_S`` and ``THALWEG_TRANSACTIONAL`` (``1``: one
Kafka transaction per epoch).
"""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import BytesEncoder, JsonCodec
from thalweg_bytewax.connectors.kafka import KafkaSink, KafkaSource

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["id", "n"],
}


def build_flow() -> Dataflow:
    """The flow, configured by the ``THALWEG_*`` variables of the module docstring."""
    brokers = os.environ["THALWEG_BOOTSTRAP_SERVERS"]
    source = KafkaSource(
        brokers,
        [os.environ["THALWEG_TOPICS"]],
        tail=False,
        batch_size=int(os.environ.get("THALWEG_BATCH_SIZE", "100")),
        max_records_per_s=float(os.environ.get("THALWEG_MAX_RECORDS_PER_S", "1000")),
    )
    flow = Dataflow("kafka_sink_crash")
    raw = op.input("kafka", flow, source)
    decoded = twg.decode("decode", raw, JsonCodec(SCHEMA))
    sink = KafkaSink(
        brokers,
        os.environ["THALWEG_OUTPUT_TOPIC"],
        encoder=BytesEncoder("id"),
        key="n",
        shards=4,
        transactional=os.environ.get("THALWEG_TRANSACTIONAL") == "1",
    )
    op.output("out", decoded.ok, sink)
    return flow


if "THALWEG_BOOTSTRAP_SERVERS" in os.environ:  # under `python -m bytewax.run`
    flow = build_flow()
