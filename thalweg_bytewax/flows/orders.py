"""The flagship flow: orders from Kafka (or the embedded sample) into tables.

Run it with no configuration and no external service, from any installation::

    thalweg run orders

(``python -m bytewax.run thalweg_bytewax.flows.orders``; from a checkout,
``python -m bytewax.run flows.orders`` runs the example that re-exports it).

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
  the bundled ODCS contract ``contracts/orders.odcs.yaml`` in quarantine mode;
* ``dlq_decode`` / ``dlq_contract`` — one dead-letter lane (``thalweg-data/dlq``, read
  back as one dataset) for records that failed to decode (reason ``decode``) or broke
  the contract (``contract`` / ``dq``, with the failed rule ids); the sample holds a few
  of each on purpose;
* ``audit_lane`` / ``rule_registry`` — one row per validated record: its verdict, the
  failed rule ids and the rule-set version, resolved by ``rules/<version>.parquet``;
* ``transform`` — the SQL DAG of ``_orders_sql.py`` on DuckDB: ``enriched``
  (``amount_eur`` from a fixed rate table) feeds ``orders`` and ``order_lines`` (the
  ``items`` array unnested, each line with its order's locator and
  ``_twg_derived_ordinal``);
* ``revenue`` — revenue in EUR and order count per ``status`` per minute of
  ``created_at`` (tumbling event-time windows);
* ``ice_*`` / ``pg_*`` — the tables ``orders`` and ``order_lines`` exactly once (by
  source offset; coverage recorded beside the raw lane), ``revenue_per_status_minute``
  upserted on (``status``, ``window_start``).

The flow is a pipeline configuration: the bundled ``orders.toml`` holds these steps as
one TOML file (from a checkout, ``THALWEG_CONFIG=thalweg_bytewax/flows/orders.toml
python -m bytewax.run flows.pipeline`` lands the same lanes and tables), and
:meth:`OrdersSettings.pipeline` is that file with the settings below applied;
:func:`~thalweg_bytewax.pipeline.build.build_pipeline` builds both.

When the run ends it prints each table with its row count, the rejects by reason and
the records per second; a run that landed nothing new says so in one line.
``docs/flows/orders.md`` describes the tables.

The writer schema comes from the bundled schema directory ``schemas/`` beside this
module (schema id 1 is ``1.avsc``, also the reader schema every writer schema resolves
to), so the default needs no registry. Point it at Kafka by environment alone::

    THALWEG_BOOTSTRAP_SERVERS=localhost:9092 thalweg run orders

| variable | meaning | default |
|---|---|---|
| ``THALWEG_BOOTSTRAP_SERVERS`` | Kafka brokers; unset = embedded sample | unset |
| ``THALWEG_SCHEMA_REGISTRY_URL`` | schema registry (writer schemas) | the bundled ``schemas/`` |
| ``THALWEG_TOPIC`` | topic to read | ``orders`` |
| ``THALWEG_DATA_DIR`` | local lake directory (lanes and Iceberg warehouse) | ``thalweg-data`` |
| ``THALWEG_SAMPLE_ORDERS`` | number of sample orders | ``20000`` |
| ``THALWEG_TAIL`` | with Kafka: ``1`` follow new records, ``0`` stop at the end | ``1`` |
| ``THALWEG_CONTRACT`` | ODCS contract (path or URL) | the bundled ``contracts/orders.odcs.yaml`` |
| ``THALWEG_DEDUP_WINDOW`` | how long a record id is remembered (seconds or ISO 8601) | ``3600`` |
| ``THALWEG_ICEBERG_NAMESPACE`` | Iceberg namespace of the tables | ``sales`` |
| ``THALWEG_ICEBERG_KEEP_SNAPSHOTS`` | snapshots each table's history keeps | ``100`` |
| ``THALWEG_POSTGRES_DSN`` | PostgreSQL to land the tables in too (a secret) | unset |
| ``THALWEG_POSTGRES_SCHEMA`` | PostgreSQL schema of the tables | ``public`` |
| ``THALWEG_WINDOW_LATENESS`` | how long a revenue window waits for late orders | ``3600`` |
| ``THALWEG_OBSERVABILITY`` | OTLP export: ``THALWEG_OBSERVABILITY__OTLP__<KEY>`` | off |

A bad value raises ``ConfigError`` naming the variable when this module is imported:
the import reads the environment. The dataflow is built the first time ``flow`` is read
(``python -m bytewax.run`` and ``thalweg run`` read it right after the import; a test
that imports ``OrdersSettings`` or ``build_flow`` builds none): that reads the contract
and builds the steps; it starts no thread or process and touches no network or disk —
unless ``THALWEG_CONTRACT`` is a URL, which is fetched then, because the contract shapes
the dataflow. Kafka, the registry, the catalog and
PostgreSQL are reached only when the dataflow runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.outputs import Sink
from pydantic import Field, model_validator

from thalweg_bytewax.codecs import AvroCodec
from thalweg_bytewax.config import Duration, PositiveDuration, SecretRef, Settings, renamed_keys
from thalweg_bytewax.connectors.iceberg.config import DEFAULT_KEEP_SNAPSHOTS, MIN_KEEP_SNAPSHOTS
from thalweg_bytewax.connectors.raw_lane import only_output
from thalweg_bytewax.coverage.recovery_plan import RawLane
from thalweg_bytewax.flows import ORDERS_CONTRACT, ORDERS_SCHEMAS
from thalweg_bytewax.flows._orders_sql import ORDERS_DAG, revenue_window
from thalweg_bytewax.flows._orders_tables import TableTargets, sink_sections
from thalweg_bytewax.observability.settings import ObservabilitySection
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline.build import build_pipeline
from thalweg_bytewax.registry import DirectorySchemaSource

__all__ = [
    "CONTRACT",
    "SCHEMA_DIR",
    "OrdersSettings",
    "build_flow",
    "flow",
    "recovery_flow",
    "recovery_lane",
]

SCHEMA_DIR = ORDERS_SCHEMAS
"""The bundled schema directory: the sample orders' writer schema as id 1 (``1.avsc``)."""
CONTRACT = ORDERS_CONTRACT
"""The bundled ODCS contract of the orders."""


class OrdersSettings(Settings):
    """Settings of the orders flow, read from ``THALWEG_*`` variables by :meth:`load`.

    Every field has a working default: the embedded sample, the bundled schemas and
    contract, and a local lake (Parquet lanes and an Iceberg warehouse) under
    ``thalweg-data``.
    """

    component = "flows.orders"
    old_names = {"dedup_window_s": "dedup_window", "window_lateness_s": "window_lateness"}

    bootstrap_servers: str | None = None
    """Kafka brokers; unset = the embedded sample."""
    # The URL may carry credentials: a `${env:…}` reference, or a value masked everywhere.
    schema_registry_url: SecretRef | None = None
    """Schema registry for writer schemas; unset = the bundled `thalweg_bytewax/flows/schemas`."""
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
    dedup_window: PositiveDuration = timedelta(hours=1)
    """How long a record id is remembered for deduplication: seconds or ISO 8601 (`3600`,
    `"PT1H"`); `dedup_window_s` is its old name."""
    iceberg_namespace: str = Field(default="sales", pattern=r"^[a-z_][a-z0-9_]*$")
    """The Iceberg namespace of the tables (in the warehouse under `data_dir`)."""
    iceberg_keep_snapshots: int = Field(default=DEFAULT_KEEP_SNAPSHOTS, ge=MIN_KEEP_SNAPSHOTS)
    """Snapshots each Iceberg table's history keeps (at least 64): the epoch commits expire
    older ones, carrying their coverage."""
    # A DSN carries a password: a `${env:…}` / `${file:…}` reference, or a masked value.
    postgres_dsn: SecretRef | None = None
    """A PostgreSQL DSN to land the tables in too; unset = Iceberg only."""
    postgres_schema: str = Field(default="public", pattern=r"^[a-z_][a-z0-9_]*$")
    """The PostgreSQL schema of the tables."""
    window_lateness: Duration = Field(default=timedelta(hours=1), ge=timedelta(0))
    """How long a revenue window waits for late orders, in event time: seconds or ISO 8601
    (`3600`, `"PT1H"`); `window_lateness_s` is its old name."""
    observability: ObservabilitySection = Field(default_factory=ObservabilitySection)
    """OTLP export of traces and metrics (`[observability.otlp]`), as in a pipeline file."""

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
            postgres_dsn=dsn or None,
            postgres_schema=self.postgres_schema,
        )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, cls.old_names, where="flows.orders")

    def pipeline(self) -> PipelineConfig:
        """These settings as a pipeline configuration (the bundled ``orders.toml`` as is).

        The SQL DAG and the window come from ``_orders_sql.py``; the PostgreSQL sinks are
        there when ``postgres_dsn`` is set.
        """
        registry = self.schema_registry_url
        return PipelineConfig.model_validate(
            {
                "name": "orders",
                "data_dir": self.data_dir,
                "source": (
                    {
                        "kind": "kafka",
                        "brokers": self.bootstrap_servers,
                        "topics": [self.topic],
                        "tail": self.tail,
                    }
                    if self.bootstrap_servers
                    else {"kind": "sample", "topics": [self.topic], "count": self.sample_orders}
                ),
                "codec": {
                    "kind": "avro",
                    "registry": registry,
                    "schema_dir": None if registry is not None else str(SCHEMA_DIR),
                    "reader_schema": str(SCHEMA_DIR / "1.avsc"),
                },
                "contract": {"path": self.contract, "mode": "quarantine"},
                "dedup": {"by": "record_id", "window": self.dedup_window},
                "sql": {"nodes": ORDERS_DAG},
                "windows": [revenue_window(self.window_lateness)],
                "sinks": sink_sections(
                    self.iceberg_namespace,
                    postgres_dsn=self.postgres_dsn,
                    postgres_schema=self.postgres_schema,
                    keep_snapshots=self.iceberg_keep_snapshots,
                ),
                "observability": self.observability,
            }
        )


def build_flow(
    settings: OrdersSettings,
    *,
    source: Source[tuple[str, object]] | None = None,
    raw_sink: Sink[tuple[str, object]] | None = None,
    dlq_sink: Sink[tuple[str, object]] | None = None,
    audit_sink: Sink[tuple[str, object]] | None = None,
    summary: bool = False,
) -> Dataflow:
    """Build the orders dataflow: raw lane; decode, dedup, validate; SQL and tables.

    It is the pipeline :meth:`OrdersSettings.pipeline` describes (the bundled
    ``orders.toml`` with the defaults), built by
    :func:`thalweg_bytewax.pipeline.build.build_pipeline`.

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
    return build_pipeline(
        settings.pipeline(),
        source=source,
        raw_sink=raw_sink,
        dlq_sink=dlq_sink,
        audit_sink=audit_sink,
        summary=summary,
    )


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


_SETTINGS = OrdersSettings.load()  # at import: a bad value fails here, naming its variable

flow: Dataflow
"""The dataflow ``python -m bytewax.run`` runs, built the first time it is read."""


def __getattr__(name: str) -> Dataflow:
    """Build ``flow`` from the settings read at import, once, when it is first read.

    Importing the module for its settings or builder (``OrdersSettings``,
    ``build_flow``) builds no dataflow; ``python -m bytewax.run`` and ``thalweg`` read
    ``flow`` right after the import.
    """
    if name != "flow":
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    built = build_flow(_SETTINGS, summary=True)
    globals()["flow"] = built
    return built
