"""The ``[sinks.<name>]`` sections: where a stream of the pipeline lands."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import ConfigDict, Field, model_validator

from thalweg_bytewax.config import ClientSettings, ConfigModel, SecretRef
from thalweg_bytewax.errors import ConfigError

__all__ = ["SinkKind", "SinkSection"]

SinkKind = Literal["parquet", "iceberg", "postgres", "kafka"]
"""The sink kinds a pipeline configures."""

_NEEDS: dict[str, tuple[str, ...]] = {
    "parquet": ("path",),
    "iceberg": ("table",),
    "postgres": ("dsn", "table"),
    "kafka": ("bootstrap_servers", "topic", "encoder"),
}


class SinkSection(ConfigModel):
    """One sink; its name (the table key) is its step id. ``kind`` picks the keys that apply.

    ``from`` names the stream it reads: a SQL node's ``sink`` name (or node name), a
    window's name, or ``clean`` (the records that passed the contract).
    """

    model_config = ConfigDict(**ConfigModel.model_config, populate_by_name=True)

    kind: SinkKind
    """parquet, iceberg, postgres or kafka."""
    source: str = Field(alias="from")
    """The stream it writes: a SQL node, a window, or `clean`."""
    optional: bool = False
    """Leave the sink out (with a log line) when its secret reference does not resolve."""
    mode: Literal["append", "upsert"] = "append"
    """iceberg / postgres: append rows (exactly once by locator) or upsert on `key_columns`."""
    key_columns: list[str] = Field(default_factory=list)
    """iceberg / postgres upsert: the key."""
    # parquet
    path: str | None = None
    """parquet: the directory (relative paths are under `data_dir`)."""
    # iceberg
    table: str | None = None
    """iceberg: `namespace.table`; postgres: the table name."""
    warehouse: str = "warehouse"
    """iceberg: the warehouse directory of the SQLite SQL catalog (under `data_dir`)."""
    catalog_uri: SecretRef | None = None
    """iceberg: a catalog URI (REST, SQL); unset = SQLite in the warehouse."""
    # postgres
    dsn: SecretRef | None = None
    """postgres: the DSN, as a secret reference (`${env:PG_DSN}`)."""
    db_schema: str = Field(default="public", pattern=r"^[a-z_][a-z0-9_]*$")
    """postgres: the schema of the table."""
    shards: int | None = Field(default=None, ge=1)
    """Sink partitions (default: the sink's own)."""
    # kafka
    bootstrap_servers: str | None = None
    """kafka: the brokers."""
    topic: str | None = None
    """kafka: the topic to write."""
    encoder: Literal["avro", "json", "protobuf"] | None = None
    """kafka: how rows become record values."""
    framing: Literal["confluent", "none"] | None = None
    """kafka: the value framing (default: confluent for avro and protobuf, none for json);
    confluent framing needs `registry`."""
    registry: SecretRef | None = None
    """kafka: the schema registry the encoder looks up (or registers) its schema in."""
    value_schema: str | None = None
    """kafka: the writer schema file (avro `.avsc`, json JSON Schema), relative to the
    pipeline file; avro with framing none needs it."""
    subject: str | None = None
    """kafka: the registry subject (default `<topic>-value`)."""
    auto_register: bool = False
    """kafka: register `value_schema` under the subject when it is not there yet."""
    descriptor_set: str | None = None
    """kafka, protobuf: a FileDescriptorSet file (`protoc --include_imports`)."""
    message_type: str | None = None
    """kafka, protobuf: the fully-qualified message name."""
    message_key: str | None = None
    """kafka: the column whose values are the record keys (default: none)."""
    transactional: bool = False
    """kafka: one Kafka transaction per epoch and shard (for `read_committed` readers)."""
    librdkafka: ClientSettings = Field(default_factory=dict)
    """kafka: librdkafka producer settings passed through (SASL, SSL, compression); a value
    whose key names a credential (`sasl.password`, ...) is a secret: write a reference."""
    coverage: bool = True
    """Record coverage beside the raw lane (iceberg / postgres: append mode only)."""

    @model_validator(mode="after")
    def _by_kind(self) -> Self:
        missing = [k for k in _NEEDS[self.kind] if getattr(self, k) is None]
        if missing:
            keys = ", ".join(f"`{m}`" for m in missing)
            msg = f"pipeline sink ({self.kind}): expected {keys}; got none"
            raise ConfigError(msg)
        if self.kind == "kafka" and self.framing != "none" and self.encoder != "json":
            if self.registry is None:
                msg = (
                    f"pipeline sink (kafka, {self.encoder}): confluent framing expected "
                    "`registry`; got none; set `registry` or framing = 'none'"
                )
                raise ConfigError(msg)
        if self.mode == "upsert" and not self.key_columns:
            msg = (
                f"pipeline sink ({self.kind}): mode 'upsert' expected `key_columns`; "
                "got none; name the columns a row is unique by"
            )
            raise ConfigError(msg)
        return self
