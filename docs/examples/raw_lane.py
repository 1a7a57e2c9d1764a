"""Kafka topics into an exactly-once Parquet raw lane.

Run it against any broker (``thalweg dev broker`` starts a local one)::

    KAFKA_BOOTSTRAP=localhost:9092 KAFKA_TOPICS=orders python -m bytewax.run docs.examples.raw_lane
"""

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink

source = KafkaSource(
    os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"),
    os.environ.get("KAFKA_TOPICS", "orders").split(","),
    tail=os.environ.get("KAFKA_TAIL", "1") == "1",  # 0: stop at the end offsets
    starting_offset="earliest",
    # Any librdkafka setting passes through, e.g. SASL:
    # add_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", ...},
)

flow = Dataflow("raw_lane")
raw = op.input("kafka", flow, source)  # keyed RawBatches: ("orders:3", RecordBatch)
op.output("lane", raw, ParquetSink(os.environ.get("LANE_PATH", "lake/raw")))
