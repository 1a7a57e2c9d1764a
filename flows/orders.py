"""The flagship flow: orders from Kafka (or the embedded sample) into trustworthy tables.

Run it with no configuration and no external service::

    python -m bytewax.run flows.orders

By default it reads bundled, deterministic sample orders — Confluent-framed Avro,
exactly as a real topic carries them — and writes the raw lane under
``thalweg-data/raw``. Point it at Kafka by environment alone::

    THALWEG_BOOTSTRAP_SERVERS=localhost:9092 python -m bytewax.run flows.orders

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BOOTSTRAP_SERVERS`` | Kafka brokers; unset = embedded sample | unset |
| ``THALWEG_ORDERS_TOPIC`` | topic to read | ``orders`` |
| ``THALWEG_DATA_DIR`` | local lake directory | ``thalweg-data`` |
| ``THALWEG_SAMPLE_ORDERS`` | number of sample orders | ``20000`` |
| ``THALWEG_TAIL`` | with Kafka: ``1`` follow new records, ``0`` stop at the end | ``1`` |

Importing this module builds the dataflow but starts no process and touches no network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.outputs import Sink
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows._orders_sample import SampleOrdersSource
from flows._summary import SummarySink
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError

__all__ = ["OrdersSettings", "build_flow", "flow"]


class OrdersSettings(BaseModel):
    """Settings of the orders flow; every field has a working default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str | None = None
    topic: str = "orders"
    data_dir: Path = Path("thalweg-data")
    sample_orders: int = Field(default=20_000, ge=1)
    tail: bool = True

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> OrdersSettings:
        """Read ``THALWEG_*`` environment variables over the defaults.

        Raises:
            ConfigError: Naming the variable whose value is invalid.
        """
        env = os.environ if env is None else env
        mapping = {
            "bootstrap_servers": "THALWEG_BOOTSTRAP_SERVERS",
            "topic": "THALWEG_ORDERS_TOPIC",
            "data_dir": "THALWEG_DATA_DIR",
            "sample_orders": "THALWEG_SAMPLE_ORDERS",
            "tail": "THALWEG_TAIL",
        }
        values = {field: env[var] for field, var in mapping.items() if env.get(var)}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            bad = ", ".join(mapping[str(e["loc"][0])] for e in exc.errors() if e["loc"])
            msg = f"flows.orders: invalid setting in {bad}: {exc.errors()[0]['msg']}"
            raise ConfigError(msg) from exc

    @property
    def raw_lane(self) -> Path:
        """Where the raw lane lives."""
        return self.data_dir / "raw"


def build_flow(
    settings: OrdersSettings,
    *,
    source: Source[tuple[str, object]] | None = None,
    raw_sink: Sink[tuple[str, object]] | None = None,
) -> Dataflow:
    """Build the orders dataflow.

    Args:
        settings: Flow settings (see :meth:`OrdersSettings.load`).
        source: Replace the input (tests inject ``TestingSource``).
        raw_sink: Replace the raw-lane sink.

    Returns:
        The dataflow, ready for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.
    """
    if source is None:
        if settings.bootstrap_servers:
            source = KafkaSource(settings.bootstrap_servers, [settings.topic], tail=settings.tail)
        else:
            source = SampleOrdersSource(settings.sample_orders, topic=settings.topic)
    flow = Dataflow("orders")
    raw = op.input("orders_in", flow, source)
    op.output("raw_lane", raw, raw_sink or ParquetSink(settings.raw_lane))
    op.output("summary", raw, SummarySink(f"orders raw lane -> {settings.raw_lane}"))
    return flow


flow = build_flow(OrdersSettings.load())
