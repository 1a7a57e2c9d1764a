"""The sections of a pipeline configuration: source, codec, contract, dedup, lanes, SQL.

The ``[[windows]]`` section is :mod:`thalweg_bytewax.pipeline._window_section`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from thalweg_bytewax.config import (
    ConfigModel,
    PositiveDuration,
    SecretRef,
    renamed_keys,
)
from thalweg_bytewax.connectors.files.config import FileSourceConfig
from thalweg_bytewax.connectors.kafka.config import KafkaSourceConfig
from thalweg_bytewax.connectors.raw_lane.config import RawLaneSourceConfig
from thalweg_bytewax.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = [
    "AuditSection",
    "CodecSection",
    "ContractSection",
    "DedupSection",
    "DlqSection",
    "RawLaneSection",
    "SampleSourceSection",
    "SourceKind",
    "SourceSection",
    "SqlNodeSection",
    "SqlSection",
]

SourceKind = Literal["kafka", "files", "raw_lane", "sample"]
"""Where a pipeline reads: a Kafka topic, files, a raw lane, or the embedded sample orders."""


def _need(section: str, kind: str, missing: list[str]) -> None:
    if missing:
        keys = ", ".join(f"`{section}.{m}`" for m in missing)
        msg = (
            f"pipeline `[{section}]`: kind {kind!r} expected {keys}; got none; "
            f"set it in the file or with `--set {section}.{missing[0]}=...`"
        )
        raise ConfigError(msg)


class SampleSourceSection(ConfigModel):
    """The embedded sample orders (``kind = "sample"``, the default): no broker needed."""

    kind: Literal["sample"] = "sample"
    """The source kind, as the `[source]` table names it."""
    topics: list[str] = Field(default_factory=lambda: ["orders"], min_length=1)
    """The first names the sample's topic (its partition keys, `<topic>:<n>`)."""
    count: int = Field(default=20_000, ge=1)
    """How many orders the embedded source generates."""
    partitions: int = Field(default=4, ge=1)
    """How many partitions they spread over."""
    batch_size: int = Field(default=2_000, ge=1)
    """Records per batch at most."""
    seed: int = 7
    """The seed (same seed, same orders)."""


_SOURCES: dict[str, type[ConfigModel]] = {
    "kafka": KafkaSourceConfig,
    "files": FileSourceConfig,
    "raw_lane": RawLaneSourceConfig,
    "sample": SampleSourceSection,
}
# Keys a kind takes under an old name (the model renames them, with a warning).
_OLD_KEYS = {"kafka": {"bootstrap_servers"}}


def _source_table(data: object) -> object:
    """The ``[source]`` table with its kind set and the keys of other kinds left out.

    Layers may switch the kind (``--set source.kind=kafka`` over a file of the sample
    source): a key only another kind takes is then not used, and logged; a key no kind
    takes is refused by name.
    """
    if not isinstance(data, dict):
        return data
    kind = data.get("kind", "sample")
    if kind not in _SOURCES:
        msg = f"pipeline `[source]`: `kind` expected one of {list(_SOURCES)}; got {kind!r}"
        raise ConfigError(msg)
    own = set(_SOURCES[kind].model_fields) | _OLD_KEYS.get(kind, set())
    others = {k for name, m in _SOURCES.items() if name != kind for k in m.model_fields}
    others |= {k for name, keys in _OLD_KEYS.items() if name != kind for k in keys}
    stray = sorted(k for k in data if k not in own and k in others)
    if stray:
        logger.info("pipeline [source] kind %s: keys of other kinds not used: %s", kind, stray)
    return {"kind": kind, **{k: v for k, v in data.items() if k not in stray and k != "kind"}}


SourceSection = Annotated[
    KafkaSourceConfig | FileSourceConfig | RawLaneSourceConfig | SampleSourceSection,
    Field(discriminator="kind"),
    BeforeValidator(_source_table),
]
"""Where the records come from: ``kind`` picks the model, and the keys are that model's
(:class:`~thalweg_bytewax.connectors.kafka.KafkaSourceConfig`,
:class:`~thalweg_bytewax.connectors.files.FileSourceConfig`,
:class:`~thalweg_bytewax.connectors.raw_lane.RawLaneSourceConfig` or
:class:`SampleSourceSection`), under the names their Python keywords have."""


class CodecSection(ConfigModel):
    """How payloads decode (Kafka and sample sources; files carry their own columns)."""

    kind: Literal["avro", "protobuf", "json"] = "avro"
    """The payload format."""
    registry: SecretRef | None = None
    """A schema registry URL (http(s)://, mock://); may hold credentials: a reference."""
    schema_dir: str | None = None
    """A local schema directory (`<id>.avsc`, ...) used as an offline registry (avro: with
    neither this nor `registry`, a sample source uses the bundled sample schemas)."""
    reader_schema: str | None = None
    """avro: the reader schema file every writer schema resolves to."""
    framing: Literal["confluent", "none"] = "confluent"
    """The wire framing (Confluent: magic byte and schema id)."""
    descriptor_set: str | None = None
    """protobuf: a FileDescriptorSet file (`protoc --include_imports`)."""
    message_type: str | None = None
    """protobuf: the fully-qualified message name."""
    json_schema: str | None = None
    """json: a JSON Schema file (default: the contract's schema)."""
    metadata: Literal["none", "locator", "all"] = "locator"
    """Which `_twg_` columns the decoded lane keeps."""

    @model_validator(mode="after")
    def _by_kind(self) -> Self:
        if self.kind == "protobuf":
            ok = self.registry is not None or self.descriptor_set is not None
            _need("codec", self.kind, [] if ok else ["descriptor_set"])
        return self


class ContractSection(ConfigModel):
    """The ODCS contract the decoded records must meet."""

    path: str | None = None
    """The ODCS v3 contract, a path or URL; unset = no contract step."""
    mode: Literal["strict", "quarantine", "annotate"] = "quarantine"
    """strict fails the batch, quarantine diverts bad rows to the DLQ, annotate flags them."""
    sql_memory_limit_mb: int = Field(default=256, ge=16)
    """The memory limit of the DuckDB database the contract's SQL rules run on, in MiB."""


class DedupSection(ConfigModel):
    """Dropping replays before the contract."""

    enabled: bool = True
    """Drop records already seen (a restart, a redelivery)."""
    by: Literal["record_id", "natural_key"] = "record_id"
    """What a duplicate shares: the record id, or the contract's natural key."""
    window: PositiveDuration = timedelta(hours=1)
    """How long a key is remembered: seconds or ISO 8601 (`3600`, `"PT1H"`); `window_s`
    is its old name."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: object) -> object:
        return renamed_keys(data, {"window_s": "window"}, where="pipeline [dedup]")


class RawLaneSection(ConfigModel):
    """The raw lane: every record as read, envelope intact; coverage is recorded beside it."""

    enabled: bool = True
    """Write the raw lane (a Kafka source with two or more sinks needs it)."""
    path: str = "raw"
    """Its directory (relative paths are under `data_dir`)."""


class DlqSection(ConfigModel):
    """The dead-letter lane."""

    path: str = "dlq"
    """Its directory (relative paths are under `data_dir`); decode and contract rejects go
    to `decode/` and `contract/` below it and read back as one dataset."""


class AuditSection(ConfigModel):
    """The audit lane: one verdict row per validated record, and the rule registry."""

    enabled: bool = True
    """Write the audit lane and the rule registry (with a contract)."""
    path: str = "audit"
    """Its directory (relative paths are under `data_dir`)."""
    rules_path: str = "rules"
    """The rule registry (`<version>.parquet`; relative paths are under `data_dir`)."""


class SqlNodeSection(ConfigModel):
    """One node of the SQL DAG (the `[[nodes]]` shape of `thalweg_bytewax.sql.dag`)."""

    name: str
    """A snake_case identifier; other nodes read its rows under it."""
    query: str
    """Exactly one SELECT over `input` and the nodes in `depends_on`."""
    depends_on: list[str] = Field(default_factory=list)
    """The nodes the query reads (`input` is always readable)."""
    sink: str | None = None
    """A name for this node's rows (sinks and windows read it with `from`)."""
    materialise: bool = True
    """Always true: a node's rows are computed once per batch."""


class SqlSection(ConfigModel):
    """The SQL DAG run per batch of clean records (DuckDB)."""

    nodes: list[SqlNodeSection] = Field(default_factory=list)
    """The nodes, as `[[sql.nodes]]` tables; none = no transform step."""
    timeout: PositiveDuration | None = None
    """A time bound per node and batch (seconds or ISO-8601; `timeout_s` is its old name);
    unset = none."""
    memory_limit_mb: int = Field(default=1024, ge=16)
    """The memory limit of the DuckDB database the nodes run on, in MiB (no spill to disk)."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: object) -> object:
        return renamed_keys(data, {"timeout_s": "timeout"}, where="pipeline [sql]")
