"""The ``[sinks.<name>]`` sections: where a stream of the pipeline lands.

A section is the sink connector's own configuration model (``ParquetSinkConfig``,
``ArrowIPCSinkConfig``, ``IcebergSinkConfig``, ``PostgresSinkConfig``,
``KafkaSinkConfig``, ``FlightSinkConfig``) plus the keys only a pipeline has (``from``,
``optional``, ``coverage``; a kafka sink's encoder keys); ``kind`` picks the model, so a section is
checked by the same rules as the sink's keywords. Keys renamed when the sections became
the connectors' models still load, with a ``DeprecationWarning``: postgres ``db_schema``
(now ``schema``), iceberg ``warehouse`` and ``catalog_uri`` (now ``catalog.warehouse``
and ``catalog.uri``), kafka ``bootstrap_servers`` and ``message_key`` (now ``brokers``
and ``key``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from thalweg_bytewax.config import ConfigModel, SecretRef, renamed_keys
from thalweg_bytewax.connectors.arrow_ipc.config import ArrowIPCSinkConfig
from thalweg_bytewax.connectors.flight.config import FlightSinkConfig
from thalweg_bytewax.connectors.iceberg.config import IcebergSinkConfig
from thalweg_bytewax.connectors.kafka.config import KafkaSinkConfig
from thalweg_bytewax.connectors.parquet.config import ParquetSinkConfig
from thalweg_bytewax.connectors.postgres.config import PostgresSinkConfig
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "ArrowIPCSinkSection",
    "FlightSinkSection",
    "IcebergSinkSection",
    "KafkaSinkSection",
    "ParquetSinkSection",
    "PostgresSinkSection",
    "SinkKind",
    "SinkSection",
]

SinkKind = Literal["parquet", "arrow_ipc", "iceberg", "postgres", "kafka", "flight"]
"""The sink kinds a pipeline configures."""

# The iceberg catalog of a section that names none: SQLite in `warehouse` (under `data_dir`).
_DEFAULT_WAREHOUSE = "warehouse"


class _PipelineKeys(ConfigModel):
    """The keys every sink section has, whatever its kind."""

    model_config = ConfigDict(**ConfigModel.model_config, populate_by_name=True)

    source: str = Field(alias="from")
    """The stream it writes: a SQL node, a window, or `clean`."""
    optional: bool = False
    """Leave the sink out (with a log line) when its secret reference does not resolve."""
    coverage: bool = True
    """Record coverage beside the raw lane (iceberg / postgres: append mode only)."""


def _refuse_locators(section: Any) -> None:
    if "locators" in section.model_fields_set:
        msg = (
            f"pipeline sink ({section.kind}): `locators` is set by the pipeline from the "
            "stream a sink reads (windows carry none); remove it"
        )
        raise ConfigError(msg)


def _needs_key(section: Any) -> None:
    if section.mode == "upsert" and not section.key_columns:
        msg = (
            f"pipeline sink ({section.kind}): mode 'upsert' expected `key_columns`; "
            "got none; name the columns a row is unique by"
        )
        raise ConfigError(msg)


class ParquetSinkSection(_PipelineKeys, ParquetSinkConfig):
    """A Parquet lane (`path` relative to `data_dir`), exactly once by locator."""

    kind: Literal["parquet"]
    """parquet: a Parquet lane."""


class ArrowIPCSinkSection(_PipelineKeys, ArrowIPCSinkConfig):
    """A directory of Arrow IPC files (`path` relative to `data_dir`), exactly once."""

    kind: Literal["arrow_ipc"]
    """arrow_ipc: a directory of Arrow IPC files."""


class IcebergSinkSection(_PipelineKeys, IcebergSinkConfig):
    """An Iceberg table; the catalog defaults to SQLite in `warehouse` under `data_dir`."""

    kind: Literal["iceberg"]
    """iceberg: an Iceberg table."""

    @model_validator(mode="before")
    @classmethod
    def _catalog_keys(cls, data: Any) -> Any:
        data = renamed_keys(
            data,
            {"warehouse": "catalog.warehouse", "catalog_uri": "catalog.uri"},
            where="pipeline sink (iceberg)",
        )
        if not isinstance(data, dict):
            return data
        data = dict(data)
        catalog = data.get("catalog")
        catalog = dict(catalog) if isinstance(catalog, dict) else catalog
        for old, new in (("catalog.warehouse", "warehouse"), ("catalog.uri", "uri")):
            if old in data:
                value = data.pop(old)
                if isinstance(catalog, dict):
                    catalog.setdefault(new, value)
                elif catalog is None:
                    catalog = {new: value}
        if catalog is None:
            catalog = {}
        if isinstance(catalog, dict):
            catalog.setdefault("warehouse", _DEFAULT_WAREHOUSE)
        data["catalog"] = catalog
        return data

    @model_validator(mode="after")
    def _pipeline(self) -> Self:
        _refuse_locators(self)
        return self


class PostgresSinkSection(_PipelineKeys, PostgresSinkConfig):
    """A PostgreSQL table; `dsn` is a secret reference (`${env:PG_DSN}`)."""

    kind: Literal["postgres"]
    """postgres: a PostgreSQL table."""

    @model_validator(mode="before")
    @classmethod
    def _schema_key(cls, data: Any) -> Any:
        return renamed_keys(data, {"db_schema": "schema"}, where="pipeline sink (postgres)")

    @model_validator(mode="after")
    def _pipeline(self) -> Self:
        _refuse_locators(self)
        _needs_key(self)
        return self


class KafkaSinkSection(_PipelineKeys, KafkaSinkConfig):
    """A Kafka topic, one record per row, exactly once by locator (transactional or not)."""

    kind: Literal["kafka"]
    """kafka: a Kafka topic."""
    encoder: Literal["avro", "json", "protobuf"]
    """How rows become record values."""
    framing: Literal["confluent", "none"] | None = None
    """The value framing (default: confluent for avro and protobuf, none for json);
    confluent framing needs `registry`."""
    registry: SecretRef | None = None
    """The schema registry the encoder looks up (or registers) its schema in."""
    value_schema: str | None = None
    """The writer schema file (avro `.avsc`, json JSON Schema), relative to the pipeline
    file; avro with framing none needs it."""
    subject: str | None = None
    """The registry subject (default `<topic>-value`)."""
    auto_register: bool = False
    """Register `value_schema` under the subject when it is not there yet."""
    descriptor_set: str | None = None
    """protobuf: a FileDescriptorSet file (`protoc --include_imports`)."""
    message_type: str | None = None
    """protobuf: the fully-qualified message name."""

    @model_validator(mode="before")
    @classmethod
    def _key_name(cls, data: Any) -> Any:
        return renamed_keys(data, {"message_key": "key"}, where="pipeline sink (kafka)")

    @model_validator(mode="after")
    def _framing(self) -> Self:
        if self.framing != "none" and self.encoder != "json" and self.registry is None:
            msg = (
                f"pipeline sink (kafka, {self.encoder}): confluent framing expected "
                "`registry`; got none; set `registry` or framing = 'none'"
            )
            raise ConfigError(msg)
        return self


class FlightSinkSection(_PipelineKeys, FlightSinkConfig):
    """An Arrow Flight server's target, exactly once by locator; `token` is a secret reference."""

    kind: Literal["flight"]
    """flight: an Arrow Flight server (the `twg.held` protocol)."""

    @model_validator(mode="after")
    def _pipeline(self) -> Self:
        if self.coverage and "coverage" in self.model_fields_set:
            msg = (
                "pipeline sink (flight): `coverage` records nothing beside the raw lane for a "
                "flight sink (the server answers what it holds); remove it"
            )
            raise ConfigError(msg)
        return self


SinkSection = Annotated[
    ParquetSinkSection
    | ArrowIPCSinkSection
    | IcebergSinkSection
    | PostgresSinkSection
    | KafkaSinkSection
    | FlightSinkSection,
    Field(discriminator="kind"),
]
"""One sink; its name (the table key) is its step id. ``kind`` picks the model:
parquet, arrow_ipc, iceberg, postgres, kafka or flight. ``from`` names the stream it reads: a
SQL node's ``sink`` name (or node name), a window's name, or ``clean``."""
