r"""A Kafka flow on two workers with health and metrics served, then its endpoints read back.

The raw lane plus decoded orders, run with two worker threads (what
``python -m bytewax.run -w 2`` does) and ``observe(flow, port=0)``: the process serves
``/ready``, ``/health``, ``/stats`` and ``/metrics`` on a free loopback port. After the
bounded run it prints what the endpoints say. Without code, the same flow is observed
with ``THALWEG_HTTP_PORT``::

    THALWEG_HTTP_PORT=9464 THALWEG_BOOTSTRAP_SERVERS=$(cat .thalweg/broker) \
        python -m bytewax.run docs.examples.howto_scale_observe -w 2
    curl -s localhost:9464/ready; curl -s localhost:9464/metrics | grep ^thalweg_

``THALWEG_TOPICS`` (default ``orders``), ``THALWEG_DATA_DIR`` (default ``lake``),
``THALWEG_TAIL`` (default off: the run ends at the topic's end).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import cluster_main
from pydantic import Field

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.dev.samples import ORDER_AVRO_SCHEMA
from thalweg_bytewax.observability import observe, running_server


class ExampleSettings(Settings):
    """Read from THALWEG_BOOTSTRAP_SERVERS, THALWEG_TOPICS, THALWEG_DATA_DIR."""

    component = "docs.examples.howto_scale_observe"

    bootstrap_servers: str = "localhost:9092"
    topics: list[str] = Field(default=["orders"], min_length=1)
    data_dir: str = "lake"
    tail: bool = False  # THALWEG_TAIL=1: follow the topic instead of stopping at its end


def build_flow(settings: ExampleSettings) -> Dataflow:
    """Kafka -> raw lane; Kafka -> decode -> orders lane (shards: a multiple of the workers)."""
    data = Path(settings.data_dir)
    schemas = data / "schemas"  # `thalweg dev produce` frames its orders with schema id 1
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / "1.avsc").write_text(json.dumps(ORDER_AVRO_SCHEMA))
    flow = Dataflow("scale_observe")
    raw = op.input("kafka", flow, KafkaSource(settings.bootstrap_servers, settings.topics,
                                              tail=settings.tail))  # fmt: skip
    op.output("raw_lane", raw, ParquetSink(data / "raw", shards=4))
    decoded = twg.decode("decode", raw, AvroCodec(schemas))
    op.output("orders_lane", decoded.ok, ParquetSink(data / "orders", shards=4))
    return flow


def fetch(path: str) -> str:
    """GET one endpoint of this process's observability server."""
    server = running_server()
    assert server is not None
    with urllib.request.urlopen(server.url + path, timeout=10) as resp:  # noqa: S310 - loopback
        return str(resp.read().decode())


flow = build_flow(ExampleSettings.load())  # what `python -m bytewax.run` runs


def main() -> None:
    """Run on two workers, observed; then print readiness, sink rows and a few metrics."""
    observed = observe(flow, port=0)
    cluster_main(observed, [], 0, worker_count_per_proc=2)  # = python -m bytewax.run -w 2
    print("ready:", json.loads(fetch("/ready"))["ready"])
    sinks = json.loads(fetch("/health"))["components"]["sink"]
    written: dict[str, int] = {}
    for name, sink in sinks.items():
        step = name.split()[0].split(".")[-1]  # "scale_observe.raw_lane (parquet sink) #3"
        written[step] = written.get(step, 0) + sink["numbers"]["rows_written"]
    for step, rows in sorted(written.items()):
        print(f"{step}: {rows} rows written by {sum(f'.{step} ' in n for n in sinks)} shards")
    for line in fetch("/metrics").splitlines():
        if line.startswith("thalweg_step_records_in_total"):
            print(line)


if __name__ == "__main__":
    main()
