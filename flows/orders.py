"""The flagship flow: orders from Kafka (or the embedded sample) into tables.

Run it with no configuration and no external service::

    python -m bytewax.run flows.orders

By default it reads bundled, deterministic sample orders — Confluent-framed Avro,
exactly as a real topic carries them — and lands them under ``thalweg-data``: Parquet
lanes for the raw records, the rejects and the audit, and three Iceberg tables in a
local SQLite catalog (``thalweg-data/warehouse``, namespace ``sales``). With
``THALWEG_POSTGRES_DSN`` the same three tables go to PostgreSQL too. The steps, by
their step ids (the summary steps aside)::

    orders_in ─┬─ raw_lane
               └─ decode ─┬─ dlq_decode
                          └─ dedup ─ contract ─┬─ audit_lane
                                               ├─ rule_registry
                                               ├─ dlq_contract
                                               └─ transform ─┐
        ┌────────────────────────────────────────────────────┘
        ├─ transform_orders ─┬─ ice_orders
        │                    ├─ pg_orders
        │                    └─ revenue ─┬─ ice_revenue
        │                                └─ pg_revenue
        └─ transform_order_lines ─┬─ ice_lines
                                  └─ pg_lines

* ``raw_lane`` — every record, envelope intact (``thalweg-data/raw``);
* ``decode`` / ``dedup`` / ``contract`` — Avro to Arrow, replays dropped by record id,
  the ODCS contract ``flows/contracts/orders.odcs.yaml`` in quarantine mode;
* ``dlq_decode`` / ``dlq_contract`` — one dead-letter lane (``thalweg-data/dlq``, read
  back as one dataset) for records that failed to decode (reason ``decode``) or broke
  the contract (``contract`` / ``dq``, with the failed rule ids); the sample holds a few
  of each on purpose;
* ``audit_lane`` / ``rule_registry`` — one row per validated record: its verdict, the
  failed rule ids and the rule-set version, resolved by ``rules/<version>.parquet``;
* ``transform`` — the SQL DAG of ``flows/_orders_sql.py`` on DuckDB: ``enriched``
  (``amount_eur`` from a fixed rate table) feeds ``orders`` and ``order_lines`` (the
  ``items`` array unnested, each line with its order's locator and
  ``_twg_derived_ordinal``);
* ``revenue`` — revenue in EUR and order count per ``status`` per minute of
  ``created_at`` (tumbling event-time windows);
* ``ice_*`` / ``pg_*`` — the tables ``orders`` and ``order_lines`` exactly once (by
  source offset; coverage recorded beside the raw lane), ``revenue_per_status_minute``
  upserted on (``status``, ``window_start``).

When the run ends it prints each table with its row count, the rejects by reason and
the records per second; a run that landed nothing new says so in one line.
``docs/flows/orders.md`` describes the tables.

The writer schema comes from the bundled schema directory ``flows/schemas`` (schema id
1 is ``1.avsc``, also the reader schema every writer schema resolves to), so the
default needs no registry. Point it at Kafka by environment alone::

    THALWEG_BOOTSTRAP_SERVERS=localhost:9092 python -m bytewax.run flows.orders

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BOOTSTRAP_SERVERS`` | Kafka brokers; unset = embedded sample | unset |
| ``THALWEG_SCHEMA_REGISTRY_URL`` | schema registry (writer schemas) | ``flows/schemas`` |
| ``THALWEG_TOPIC`` | topic to read | ``orders`` |
| ``THALWEG_DATA_DIR`` | local lake directory (lanes and Iceberg warehouse) | ``thalweg-data`` |
| ``THALWEG_SAMPLE_ORDERS`` | number of sample orders | ``20000`` |
| ``THALWEG_TAIL`` | with Kafka: ``1`` follow new records, ``0`` stop at the end | ``1`` |
| ``THALWEG_CONTRACT`` | ODCS contract (path or URL) | ``flows/contracts/orders.odcs.yaml`` |
| ``THALWEG_DEDUP_WINDOW_S`` | how long a record id is remembered | ``3600`` |
| ``THALWEG_ICEBERG_NAMESPACE`` | Iceberg namespace of the tables | ``sales`` |
| ``THALWEG_POSTGRES_DSN`` | PostgreSQL to land the tables in too (a secret) | unset |
| ``THALWEG_POSTGRES_SCHEMA`` | PostgreSQL schema of the tables | ``public`` |
| ``THALWEG_WINDOW_LATENESS_S`` | how long a revenue window waits for late orders | ``3600`` |

A bad value raises ``ConfigError`` naming the variable. Importing this module reads the
environment and the contract and builds the dataflow; it starts no thread or process and
touches no network or disk — unless ``THALWEG_CONTRACT`` is a URL, which is fetched
then, because the contract shapes the dataflow. Kafka, the registry, the catalog and
PostgreSQL are reached only when the dataflow runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.outputs import Sink
from pydantic import Field

import thalweg_bytewax.operators as twg
from flows._orders_sample import SampleOrdersSource
from flows._orders_sql import (
    REVENUE_AGGS,
    REVENUE_GROUP_BY,
    REVENUE_TIME_COLUMN,
    REVENUE_WINDOW,
    orders_dag,
)
from flows._orders_tables import TableTargets
from flows._summary import RunReport
from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import SecretRef, Settings
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane_source import only_output
from thalweg_bytewax.connectors.rules import RuleRegistrySink
from thalweg_bytewax.contracts import load_contract
from thalweg_bytewax.metadata import DEFAULT_COLUMNS
from thalweg_bytewax.operators.sql_dag import sql_dag
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
    contract, and a local lake (Parquet lanes and an Iceberg warehouse) under
    ``thalweg-data``.
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
    """The local lake directory (raw, dlq and audit lanes, the Iceberg warehouse)."""
    sample_orders: int = Field(default=20_000, ge=1)
    """How many sample orders the embedded source generates."""
    tail: bool = True
    """With Kafka: follow new records (true) or stop at the end (false)."""
    contract: str = str(CONTRACT)
    """The ODCS contract (path or URL)."""
    dedup_window_s: float = Field(default=3600.0, gt=0)
    """How long a record id is remembered for deduplication, in seconds."""
    iceberg_namespace: str = Field(default="sales", pattern=r"^[a-z_][a-z0-9_]*$")
    """The Iceberg namespace of the tables (in the warehouse under `data_dir`)."""
    # A DSN carries a password: a `${env:…}` / `${file:…}` reference, or a masked value.
    postgres_dsn: SecretRef | None = None
    """A PostgreSQL DSN to land the tables in too; unset = Iceberg only."""
    postgres_schema: str = Field(default="public", pattern=r"^[a-z_][a-z0-9_]*$")
    """The PostgreSQL schema of the tables."""
    window_lateness_s: float = Field(default=3600.0, ge=0)
    """How long a revenue window waits for late orders, in seconds of event time."""

    @property
    def raw_lane(self) -> Path:
        """Where the raw lane lives (and the coverage store beside it)."""
        return self.data_dir / "raw"

    @property
    def dlq_lane(self) -> Path:
        """Where rejected records live (decode, contract and data-quality failures)."""
        return self.data_dir / "dlq"

    @property
    def audit_lane(self) -> Path:
        """Where each validated record's verdict lives."""
        return self.data_dir / "audit"

    @property
    def warehouse(self) -> Path:
        """The Iceberg warehouse (a SQL catalog on SQLite in it)."""
        return self.data_dir / "warehouse"

    def codec(self) -> AvroCodec:
        """The orders codec: Confluent-framed Avro, resolved to the bundled schema.

        Writer schemas come from the registry, or from the bundled schemas; every one
        resolves to ``1.avsc`` (the reader schema), so the SQL sees one shape.
        """
        reader = (SCHEMA_DIR / "1.avsc").read_text(encoding="utf-8")
        if self.schema_registry_url is not None and (url := self.schema_registry_url.resolve()):
            return AvroCodec(url, reader_schema=reader)
        return AvroCodec(DirectorySchemaSource(SCHEMA_DIR), reader_schema=reader)

    def tables(self) -> TableTargets:
        """Where the tables go: the Iceberg warehouse, and PostgreSQL when a DSN is set."""
        dsn = self.postgres_dsn.resolve() if self.postgres_dsn is not None else None
        return TableTargets(
            self.warehouse,
            self.iceberg_namespace,
            coverage_store=self.raw_lane,
            postgres_dsn=dsn or None,
            postgres_schema=self.postgres_schema,
        )


def _decoded_schema(codec: AvroCodec) -> pa.Schema:
    """What the contract's clean stream carries: the reader schema plus the locator."""
    raw = DEFAULT_COLUMNS.raw_schema
    locator = [raw.field(name) for name in DEFAULT_COLUMNS.locator_columns()]
    return pa.schema([*codec.arrow_schema, *locator])


def build_flow(  # noqa: PLR0915 - one flow, drawn in the module docstring
    settings: OrdersSettings,
    *,
    source: Source[tuple[str, object]] | None = None,
    raw_sink: Sink[tuple[str, object]] | None = None,
    dlq_sink: Sink[tuple[str, object]] | None = None,
    audit_sink: Sink[tuple[str, object]] | None = None,
    summary: bool = False,
) -> Dataflow:
    """Build the orders dataflow: raw lane; decode, dedup, validate; SQL and tables.

    Args:
        settings: Flow settings (see :meth:`OrdersSettings.load`).
        source: Replace the input (tests inject ``TestingSource``).
        raw_sink: Replace the raw-lane sink.
        dlq_sink: Replace the two dead-letter sinks with one.
        audit_sink: Replace the audit sink.
        summary: Print the end-of-run summary when the process exits after a clean
            finish (what ``python -m bytewax.run flows.orders`` does).

    Returns:
        The dataflow, ready for ``python -m bytewax.run`` or ``bytewax.testing.run_main``.
    """
    # What the records are and what they must meet: the codec and the contract.
    codec = settings.codec()
    contract = load_contract(settings.contract)
    tables = settings.tables()
    window = timedelta(seconds=settings.dedup_window_s)
    if source is None:
        if settings.bootstrap_servers:
            source = KafkaSource(settings.bootstrap_servers, [settings.topic], tail=settings.tail)
        else:
            source = SampleOrdersSource(settings.sample_orders, topic=settings.topic)

    # The dataflow: raw lane; decode, dedup, validate; DLQ and audit.
    flow = Dataflow("orders")
    raw = op.input("orders_in", flow, source)
    # The raw lane and the located tables record their coverage beside the raw lane
    # (`_coverage.sqlite3`): what `thalweg coverage` shows and `thalweg recover` replays.
    store = settings.raw_lane
    op.output("raw_lane", raw, raw_sink or ParquetSink(settings.raw_lane, coverage_store=store))
    decoded = twg.decode("decode", raw, codec, metadata="locator")
    # A replay (a restart, a redelivery) re-reads records with the same id: drop them.
    unique = twg.dedup("dedup", decoded.ok, by="record_id", window=window)
    checked = twg.validate("contract", unique, contract, mode="quarantine")
    # One DLQ, two writers: each ParquetSink takes one ordered stream per partition, so
    # decode and contract rejects land in sibling directories that read back as one.
    if dlq_sink is not None:
        rejected = op.merge("rejected", decoded.rejected, checked.rejected)
        op.output("dlq_lane", rejected, dlq_sink)
    else:
        op.output("dlq_decode", decoded.rejected, ParquetSink(settings.dlq_lane / "decode"))
        op.output("dlq_contract", checked.rejected, ParquetSink(settings.dlq_lane / "contract"))
    op.output("audit_lane", checked.audit, audit_sink or ParquetSink(settings.audit_lane))
    rules_dir = settings.data_dir / "rules"
    op.output("rule_registry", checked.audit, RuleRegistrySink(rules_dir, checked.ruleset))

    # The transform half: the SQL DAG per batch, the revenue windows, the tables.
    # The flow's own fixed SQL, not user SQL: no time bound, so binding the DAG while the
    # flow is built (at import) arms no watchdog thread.
    out = sql_dag(
        "transform",
        checked.clean,
        orders_dag(),
        schema=_decoded_schema(codec),
        timeout_seconds=None,
    )
    orders, lines = out["orders"], out["order_lines"]
    revenue = twg.window_agg(
        "revenue",
        orders,
        window=twg.Tumbling(REVENUE_WINDOW),
        aggs=REVENUE_AGGS,
        group_by=REVENUE_GROUP_BY,
        time_column=REVENUE_TIME_COLUMN,
        allowed_lateness=timedelta(seconds=settings.window_lateness_s),
    )
    for stream, table in (
        (orders, "orders"),
        (lines, "order_lines"),
        (revenue.windows, "revenue_per_status_minute"),
    ):
        for step, sink in tables.sinks(table):
            op.output(step, stream, sink)

    if summary:
        report = RunReport("orders", settings.raw_lane, tables.counts())
        op.output("summary_read", raw, report.sink("read"))
        op.output("summary_decode", decoded.rejected, report.sink("rejected", count_by="reason"))
        op.output("summary_contract", checked.rejected, report.sink("rejected", count_by="reason"))
        op.output("summary_audit", checked.audit, report.sink("audited", count_by="verdict"))
        late = report.sink("late, not in revenue windows", total_of="late_records", optional=True)
        op.output("summary_late", revenue.late, late)
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

    ``thalweg recover flows.orders --sink ice_orders`` calls it with a
    ``RawLaneSource``: the same decode, dedup, contract and SQL path as live, under the
    same flow and step ids, so the sink finds its target, skips what it holds and
    records its coverage under its own id. No other output is written and Kafka is not
    read.

    Args:
        source: The replay source (a ``RawLaneSource``).
        sink: The output step to recover, e.g. ``"ice_orders"`` or
            ``"orders.ice_lines"``.
        settings: Flow settings (default: :meth:`OrdersSettings.load`).
    """
    built = build_flow(settings or OrdersSettings.load(), source=source)
    return only_output(built, sink)


flow = build_flow(OrdersSettings.load(), summary=True)
