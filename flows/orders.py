"""The flagship flow: orders from Kafka (or the embedded sample) into trustworthy tables.

Run it with no configuration and no external service::

    python -m bytewax.run flows.orders

By default it reads bundled, deterministic sample orders — Confluent-framed Avro,
exactly as a real topic carries them — and writes these lanes under ``thalweg-data``::

    source ─┬─ raw                                  every record, envelope intact
            └─ decode ─┬─ dedup (record id) ─ validate (ODCS, quarantine) ─┬─ orders
                       │                                                    ├─ audit
                       └──────────────── dlq ◀──────────────────────────────┘

* ``raw`` — the raw lane;
* ``orders`` — decoded orders that meet the contract ``flows/contracts/orders.odcs.yaml``,
  one column per Avro field plus the locator columns;
* ``dlq`` — one dead-letter lane (``dlq/decode`` and ``dlq/contract``, read back as one
  dataset) for records that failed to decode (reason ``decode``)
  or broke the contract (``contract`` / ``dq``, with the failed rule ids); the sample
  holds a few of each on purpose;
* ``audit`` — one row per validated record: its verdict, the failed rule ids and the
  rule-set version, resolved by ``rules/<version>.parquet``.

The writer schema comes from the bundled schema directory ``flows/schemas`` (schema id
1 is ``1.avsc``), so the default needs no registry. Point it at Kafka by environment
alone::

    THALWEG_BOOTSTRAP_SERVERS=localhost:9092 python -m bytewax.run flows.orders

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BOOTSTRAP_SERVERS`` | Kafka brokers; unset = embedded sample | unset |
| ``THALWEG_SCHEMA_REGISTRY_URL`` | schema registry (writer schemas) | ``flows/schemas`` |
| ``THALWEG_TOPIC`` | topic to read | ``orders`` |
| ``THALWEG_DATA_DIR`` | local lake directory | ``thalweg-data`` |
| ``THALWEG_SAMPLE_ORDERS`` | number of sample orders | ``20000`` |
| ``THALWEG_TAIL`` | with Kafka: ``1`` follow new records, ``0`` stop at the end | ``1`` |
| ``THALWEG_CONTRACT`` | ODCS contract (path or URL) | ``flows/contracts/orders.odcs.yaml`` |
| ``THALWEG_DEDUP_WINDOW_S`` | how long a record id is remembered | ``3600`` |

A bad value raises ``ConfigError`` naming the variable. Importing this module reads the
environment and the contract and builds the dataflow; it starts no thread or process and
touches no network — unless ``THALWEG_CONTRACT`` is a URL, which is fetched then,
because the contract shapes the dataflow. Kafka and the registry are reached only when
the dataflow runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.outputs import Sink
from pydantic import Field

import thalweg_bytewax.operators as twg
from flows._orders_sample import SampleOrdersSource
from flows._summary import SummarySink
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import SecretRef, Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane_source import only_output
from thalweg_bytewax.connectors.rules import RuleRegistrySink
from thalweg_bytewax.contracts import load_contract
from thalweg_bytewax.recovery_plan import RawLane
from thalweg_bytewax.registry import DirectorySchemaSource
from thalweg_bytewax.runtime.gates import check_second_sink

__all__ = [
    "CONTRACT",
    "SCHEMA_DIR",
    "OrdersSettings",
    "build_flow",
    "flow",
    "recovery_flow",
    "recovery_lane",
]

SCHEMA_DIR = Path(__file__).parent / "schemas"
"""The bundled schema directory: the sample orders' writer schema as id 1 (``1.avsc``)."""
CONTRACT = Path(__file__).parent / "contracts" / "orders.odcs.yaml"
"""The bundled ODCS contract of the orders."""


class OrdersSettings(Settings):
    """Settings of the orders flow, read from ``THALWEG_*`` variables by :meth:`load`.

    Every field has a working default: the embedded sample, the bundled schemas and
    contract, and a local lake under ``thalweg-data``.
    """

    component = "flows.orders"

    bootstrap_servers: str | None = None
    """Kafka brokers; unset = the embedded sample."""
    # The URL may carry credentials: a `${env:…}` reference, or a value masked everywhere.
    schema_registry_url: SecretRef | None = None
    """Schema registry for writer schemas; unset = the bundled `flows/schemas`."""
    topic: str = "orders"
    """The topic to read."""
    data_dir: Path = Path("thalweg-data")
    """The local lake directory (raw, orders, dlq and audit lanes)."""
    sample_orders: int = Field(default=20_000, ge=1)
    """How many sample orders the embedded source generates."""
    tail: bool = True
    """With Kafka: follow new records (true) or stop at the end (false)."""
    contract: str = str(CONTRACT)
    """The ODCS contract (path or URL)."""
    dedup_window_s: float = Field(default=3600.0, gt=0)
    """How long a record id is remembered for deduplication, in seconds."""

    @property
    def raw_lane(self) -> Path:
        """Where the raw lane lives."""
        return self.data_dir / "raw"

    @property
    def orders_lane(self) -> Path:
        """Where the decoded orders live."""
        return self.data_dir / "orders"

    @property
    def dlq_lane(self) -> Path:
        """Where rejected records live (decode, contract and data-quality failures)."""
        return self.data_dir / "dlq"

    @property
    def audit_lane(self) -> Path:
        """Where each validated record's verdict lives."""
        return self.data_dir / "audit"

    def codec(self) -> AvroCodec:
        """The orders codec: Confluent-framed Avro from the registry, or the bundled schemas."""
        if self.schema_registry_url is not None and (url := self.schema_registry_url.resolve()):
            return AvroCodec(url)
        return AvroCodec(DirectorySchemaSource(SCHEMA_DIR))


def build_flow(
    settings: OrdersSettings,
    *,
    source: Source[tuple[str, object]] | None = None,
    raw_sink: Sink[tuple[str, object]] | None = None,
    orders_sink: Sink[tuple[str, object]] | None = None,
    dlq_sink: Sink[tuple[str, object]] | None = None,
    audit_sink: Sink[tuple[str, object]] | None = None,
) -> Dataflow:
    """Build the orders dataflow: raw lane; decode, dedup, validate; orders, DLQ, audit.

    Args:
        settings: Flow settings (see :meth:`OrdersSettings.load`).
        source: Replace the input (tests inject ``TestingSource``).
        raw_sink: Replace the raw-lane sink.
        orders_sink: Replace the decoded-orders sink.
        dlq_sink: Replace the dead-letter sink.
        audit_sink: Replace the audit sink.

    Returns:
        The dataflow, ready for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.
    """
    # What the records are and what they must meet: the codec and the contract.
    codec = settings.codec()
    contract = load_contract(settings.contract)
    window = timedelta(seconds=settings.dedup_window_s)
    if source is None:
        if settings.bootstrap_servers:
            source = KafkaSource(settings.bootstrap_servers, [settings.topic], tail=settings.tail)
        else:
            source = SampleOrdersSource(settings.sample_orders, topic=settings.topic)

    # The dataflow: raw lane; decode, dedup, validate; orders, DLQ, audit.
    flow = Dataflow("orders")
    raw = op.input("orders_in", flow, source)
    # The raw lane and the orders lane record their coverage beside the raw lane
    # (`_coverage.sqlite3`): what `thalweg coverage` shows and `thalweg recover` replays.
    store = settings.raw_lane
    op.output("raw_lane", raw, raw_sink or ParquetSink(settings.raw_lane, coverage_store=store))
    decoded = twg.decode("decode", raw, codec, metadata="locator")
    # A replay (a restart, a redelivery) re-reads records with the same id: drop them.
    unique = twg.dedup("dedup", decoded.ok, by="record_id", window=window)
    checked = twg.validate("contract", unique, contract, mode="quarantine")
    rejected = op.merge("rejected", decoded.rejected, checked.rejected)
    orders_sink = orders_sink or ParquetSink(settings.orders_lane, coverage_store=store)
    op.output("orders_lane", checked.clean, orders_sink)
    # One DLQ, two writers: each ParquetSink takes one ordered stream per partition, so
    # decode and contract rejects land in sibling directories that read back as one.
    if dlq_sink is not None:
        op.output("dlq_lane", rejected, dlq_sink)
    else:
        op.output("dlq_decode", decoded.rejected, ParquetSink(settings.dlq_lane / "decode"))
        op.output("dlq_contract", checked.rejected, ParquetSink(settings.dlq_lane / "contract"))
    op.output("audit_lane", checked.audit, audit_sink or ParquetSink(settings.audit_lane))
    rules_dir = settings.data_dir / "rules"
    op.output("rule_registry", checked.audit, RuleRegistrySink(rules_dir, checked.ruleset))

    # Summaries, printed when a bounded run ends.
    op.output("summary", raw, SummarySink(f"orders raw lane -> {settings.raw_lane}"))
    op.output(
        "orders_summary",
        checked.clean,
        SummarySink(f"orders -> {settings.orders_lane}", per_key=False),
    )
    op.output(
        "dlq_summary",
        rejected,
        SummarySink(f"rejected -> {settings.dlq_lane}", per_key=False, count_by="reason"),
    )
    op.output(
        "audit_summary",
        checked.audit,
        SummarySink(f"audited -> {settings.audit_lane}", per_key=False, count_by="verdict"),
    )
    # A Kafka source with several sinks needs its raw lane: refuse the flow otherwise.
    check_second_sink(flow)
    return flow


def recovery_lane(settings: OrdersSettings | None = None) -> RawLane:
    """Where this flow's raw lane and coverage store are (the ``thalweg recover`` hook).

    Args:
        settings: Flow settings (default: :meth:`OrdersSettings.load`).
    """
    settings = settings or OrdersSettings.load()
    return RawLane(str(settings.raw_lane), "orders.raw_lane", str(settings.raw_lane))


def recovery_flow(
    source: Source[tuple[str, object]],
    sink: str,
    *,
    settings: OrdersSettings | None = None,
) -> Dataflow:
    """This flow reading ``source`` (the raw lane) into the one output ``sink`` (the hook).

    ``thalweg recover flows.orders --sink orders_lane`` calls it with a
    ``RawLaneSource``: the same decode, dedup and contract path as live, under the same
    flow and step ids, so the sink finds its target, skips what it holds and records
    its coverage under its own id. No other output is written and Kafka is not read.

    Args:
        source: The replay source (a ``RawLaneSource``).
        sink: The output step to recover, e.g. ``"orders_lane"`` or
            ``"orders.orders_lane"``.
        settings: Flow settings (default: :meth:`OrdersSettings.load`).
    """
    built = build_flow(settings or OrdersSettings.load(), source=source)
    return only_output(built, sink)


flow = build_flow(OrdersSettings.load())
