r"""A flow ``thalweg coverage`` can inspect and ``thalweg recover`` can backfill.

``KafkaSource`` feeds a raw lane and, through ``twg.decode``, an orders lane; both record
what they commit in one coverage store (``_coverage.sqlite3`` in the raw lane). The two
module-level hooks, ``recovery_lane()`` and ``recovery_flow(source, sink)``, are what
``thalweg recover`` needs. ``THALWEG_ORDERS=0`` leaves the orders lane out of the live
flow (its target is down, or it is new), so a gap opens there. Run it, with Bytewax
recovery so each run resumes where the last stopped::

    python -m bytewax.recovery recovery 1
    THALWEG_BOOTSTRAP_SERVERS=$(cat .thalweg/broker) \
        python -m bytewax.run docs.examples.howto_recover -r recovery -s 1
    thalweg coverage lake/raw --raw-lane recover_example.raw_lane
    thalweg recover docs.examples.howto_recover --sink orders_lane

``THALWEG_TOPICS`` (default ``orders``), ``THALWEG_DATA_DIR`` (default ``lake``).
"""

from __future__ import annotations

import json
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from pydantic import Field

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane_source import only_output
from thalweg_bytewax.coverage.recovery_plan import RawLane
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA

FLOW_ID = "recover_example"


class ExampleSettings(Settings):
    """Read from THALWEG_BOOTSTRAP_SERVERS, THALWEG_TOPICS, THALWEG_DATA_DIR, THALWEG_ORDERS."""

    component = "docs.examples.howto_recover"

    bootstrap_servers: str = "localhost:9092"
    topics: list[str] = Field(default=["orders"], min_length=1)
    data_dir: str = "lake"
    orders: bool = True  # THALWEG_ORDERS=0: the orders lane is left out of the live flow


def build_flow(
    settings: ExampleSettings, source: Source[tuple[str, object]] | None = None
) -> Dataflow:
    """Kafka -> raw lane; Kafka -> decode -> orders lane, both recording their coverage."""
    data = Path(settings.data_dir)
    store = data / "raw"  # the coverage store lives in the raw lane's directory
    schemas = data / "schemas"  # `thalweg dev produce` frames its orders with schema id 1
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))

    flow = Dataflow(FLOW_ID)
    if source is None:
        source = KafkaSource(settings.bootstrap_servers, settings.topics, tail=False)
    raw = op.input("kafka", flow, source)
    op.output("raw_lane", raw, ParquetSink(data / "raw", coverage_store=store))
    decoded = twg.decode("decode", raw, AvroCodec(schemas))
    if settings.orders or not isinstance(source, KafkaSource):
        op.output("orders_lane", decoded.ok, ParquetSink(data / "orders", coverage_store=store))
    return flow


def recovery_lane() -> RawLane:
    """Where the raw lane and the coverage store are, and the raw lane's sink id."""
    data = Path(ExampleSettings.load().data_dir)
    return RawLane(path=str(data / "raw"), sink_id=f"{FLOW_ID}.raw_lane", store=str(data / "raw"))


def recovery_flow(source: Source[tuple[str, object]], sink: str) -> Dataflow:
    """The live flow reading ``source`` (the raw lane) into the one output ``sink``."""
    return only_output(build_flow(ExampleSettings.load(), source=source), sink)


flow = build_flow(ExampleSettings.load())
