r"""Kafka topics into an exactly-once Parquet raw lane.

Run it against any broker (``thalweg dev broker &`` starts a local one and writes its
address to ``.thalweg/broker``)::

    THALWEG_BOOTSTRAP_SERVERS=$(cat .thalweg/broker) THALWEG_TOPICS=orders \
        python -m bytewax.run docs.examples.raw_lane
"""

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from pydantic import Field

from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink


class ExampleSettings(Settings):
    """Read from THALWEG_BOOTSTRAP_SERVERS, THALWEG_TOPICS, THALWEG_TAIL, THALWEG_RAW_LANE."""

    component = "docs.examples.raw_lane"

    bootstrap_servers: str = "localhost:9092"
    topics: list[str] = Field(default=["orders"], min_length=1)  # comma-separated in env
    tail: bool = True  # THALWEG_TAIL=0: stop at the end offsets
    raw_lane: str = "lake/raw"


settings = ExampleSettings.load()  # a bad value: ConfigError naming the variable
source = KafkaSource(
    settings.bootstrap_servers,
    settings.topics,
    tail=settings.tail,
    starting_offset="earliest",
    # Any librdkafka setting passes through, e.g. SASL:
    # librdkafka={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", ...},
)

flow = Dataflow("raw_lane")
raw = op.input("kafka", flow, source)  # keyed RawBatches: ("orders:3", RecordBatch)
op.output("lane", raw, ParquetSink(settings.raw_lane))
