"""The sections of a pipeline configuration: source, codec, contract, dedup, lanes, windows."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Self

from pydantic import Field, model_validator

from thalweg_bytewax.config import ClientSettings, ConfigModel, SecretRef
from thalweg_bytewax.errors import ConfigError

if TYPE_CHECKING:
    from thalweg_bytewax.windows.aggregate import WindowSpec

__all__ = [
    "AuditSection",
    "CodecSection",
    "ContractSection",
    "DedupSection",
    "DlqSection",
    "RawLaneSection",
    "SourceSection",
    "SqlNodeSection",
    "SqlSection",
    "WindowKind",
    "WindowSection",
]

SourceKind = Literal["kafka", "files", "sample"]
"""Where a pipeline reads: a Kafka topic, files, or the embedded sample orders."""


def _need(section: str, kind: str, missing: list[str]) -> None:
    if missing:
        keys = ", ".join(f"`{section}.{m}`" for m in missing)
        msg = (
            f"pipeline `[{section}]`: kind {kind!r} expected {keys}; got none; "
            f"set it in the file or with `--set {section}.{missing[0]}=...`"
        )
        raise ConfigError(msg)


class SourceSection(ConfigModel):
    """Where the records come from: ``kind`` picks the keys that apply."""

    kind: SourceKind = "sample"
    """`kafka` (a topic), `files` (FileSource over paths or globs) or `sample` (embedded orders)."""
    # kafka
    bootstrap_servers: str | None = None
    """kafka: the brokers, `host:port[,host:port]`."""
    topics: list[str] = Field(default_factory=lambda: ["orders"])
    """kafka: the topics to read (sample: the first names the sample's topic)."""
    tail: bool = True
    """kafka: follow new records (true) or stop at the end (false)."""
    starting_offset: Literal["earliest", "latest"] = "earliest"
    """kafka: where a partition with no stored position starts."""
    librdkafka: ClientSettings = Field(default_factory=dict)
    """kafka: librdkafka settings passed through (SASL, SSL); last wins. A value whose key
    names a credential (`sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`,
    ...) is a secret: write a reference (`${env:KAFKA_PASSWORD}`); it is never shown."""
    password: SecretRef | None = None
    """kafka: the SASL password (`sasl.password`), as a secret reference."""
    # files
    paths: list[str] = Field(default_factory=list)
    """files: paths, globs or URLs; one partition per file."""
    format: str | None = None
    """files: parquet, csv, ndjson, avro, ipc, excel or xml (default: by suffix)."""
    batch_rows: int = Field(default=65_536, ge=1)
    """files: rows per batch at most."""
    # sample
    count: int = Field(default=20_000, ge=1)
    """sample: how many orders the embedded source generates."""
    partitions: int = Field(default=4, ge=1)
    """sample: how many partitions they spread over."""
    batch_size: int | None = Field(default=None, ge=1)
    """kafka / sample: records per batch at most (default: the source's own; sample 2000)."""
    prefetch_budget: int | None = Field(default=None, ge=1)
    """kafka: bytes librdkafka may prefetch for all partitions of a process, shared out
    evenly (default: the source's own, 256 MiB)."""
    seed: int = 7
    """sample: the seed (same seed, same orders)."""

    @model_validator(mode="after")
    def _by_kind(self) -> Self:
        if self.kind == "kafka":
            _need("source", self.kind, [] if self.bootstrap_servers else ["bootstrap_servers"])
        if self.kind == "files":
            _need("source", self.kind, [] if self.paths else ["paths"])
        if not self.topics:
            _need("source", self.kind, ["topics"])
        return self


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
    window_s: float = Field(default=3600.0, gt=0)
    """How long a key is remembered, in seconds."""


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
    timeout_s: float | None = Field(default=None, gt=0)
    """A time bound per node and batch; unset = none."""
    memory_limit_mb: int = Field(default=1024, ge=16)
    """The memory limit of the DuckDB database the nodes run on, in MiB (no spill to disk)."""


WindowKind = Literal["tumbling", "sliding", "session"]
"""The kinds of event-time window a pipeline declares (`[[windows]]` ``kind``)."""

# The keys that size a window, by kind: a window takes its own kind's and no other's.
_WINDOW_KEYS: dict[str, tuple[str, ...]] = {
    "tumbling": ("size_s",),
    "sliding": ("length_s", "step_s"),
    "session": ("gap_s",),
}


class WindowSection(ConfigModel):
    """An event-time window over a SQL node's rows; ``kind`` picks the keys that size it.

    * ``tumbling`` (the default): fixed, non-overlapping windows of ``size_s``;
    * ``sliding``: windows of ``length_s`` starting every ``step_s`` (``step_s`` <=
      ``length_s``; a record counts in every window that holds it);
    * ``session``: runs of a group's records less than ``gap_s`` apart; a session ends
      ``gap_s`` after its last record.

    Windows are aligned to the Unix epoch (UTC), as in
    :func:`thalweg_bytewax.operators.window_agg`, which builds them. Sinks read the
    closed windows with ``from = "<name>"`` and the late records' report with
    ``from = "<name>.late"``.
    """

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    """The window's step id; sinks read its results with `from = "<name>"`."""
    source: str = Field(alias="from")
    """The SQL node (its `sink` name or node name) whose rows are windowed."""
    kind: WindowKind = "tumbling"
    """`tumbling` (takes `size_s`), `sliding` (`length_s`, `step_s`) or `session` (`gap_s`)."""
    size_s: float | None = None
    """tumbling: the window length, in seconds."""
    length_s: float | None = None
    """sliding: the window length, in seconds."""
    step_s: float | None = None
    """sliding: seconds from one window's start to the next (at most `length_s`)."""
    gap_s: float | None = None
    """session: the silence, in seconds, that ends a group's session."""
    time_column: str
    """The event-time column (a timestamp)."""
    group_by: list[str] = Field(default_factory=list)
    """The group columns."""
    aggs: dict[str, list[str]]
    """Output column = [function, input column], e.g. `revenue_eur = ["sum", "amount_eur"]`;
    functions: count (column `*` counts every row), sum, min, max, avg."""
    allowed_lateness_s: float = 0.0
    """How long a window waits for late records, in seconds of event time (>= 0)."""
    allowed_skew_s: float = 60.0
    """How far ahead of its ingest time a record's event time may be before it is clamped
    (>= 0)."""

    @model_validator(mode="before")
    @classmethod
    def _known_kind(cls, data: object) -> object:
        if isinstance(data, dict) and "kind" in data and data["kind"] not in _WINDOW_KEYS:
            name = data.get("name", "?")
            msg = (
                f"pipeline window `{name}`: `kind` expected one of {list(_WINDOW_KEYS)}; "
                f"got {data['kind']!r}"
            )
            raise ConfigError(msg)
        return data

    @model_validator(mode="after")
    def _by_kind(self) -> Self:
        where = f"pipeline window `{self.name}` ({self.kind})"
        own = _WINDOW_KEYS[self.kind]
        for kind, keys in _WINDOW_KEYS.items():
            stray = [k for k in keys if k not in own and getattr(self, k) is not None]
            if stray:
                msg = (
                    f"{where}: `{stray[0]}` is for {kind} windows; a {self.kind} window "
                    f"expected {', '.join(f'`{k}`' for k in own)}"
                )
                raise ConfigError(msg)
        for key in own:
            value = getattr(self, key)
            if value is None:
                msg = f"{where}: expected `{key}` (seconds, > 0); got none; add it to the table"
                raise ConfigError(msg)
            if not value > 0:
                msg = f"{where}: expected `{key}` > 0 seconds; got {value!r}"
                raise ConfigError(msg)
        for key in ("allowed_lateness_s", "allowed_skew_s"):
            if not getattr(self, key) >= 0:
                msg = f"{where}: expected `{key}` >= 0 seconds; got {getattr(self, key)!r}"
                raise ConfigError(msg)
        if self.kind == "sliding" and (self.step_s or 0) > (self.length_s or 0):
            msg = (
                f"{where}: expected `step_s` <= `length_s` ({self.length_s!r}); got "
                f'{self.step_s!r}; for gaps between windows use kind = "tumbling"'
            )
            raise ConfigError(msg)
        for out, spec in self.aggs.items():
            if len(spec) != 2:  # noqa: PLR2004 - [function, column]
                msg = (
                    f"pipeline window `{self.name}`: aggregate `{out}` expected "
                    f"[function, column]; got {spec!r}"
                )
                raise ConfigError(msg)
        # The operator's own checks (functions, names), at load rather than at build.
        from thalweg_bytewax.windows.aggregate import WindowPlan  # noqa: PLC0415 - pyarrow

        try:
            WindowPlan(self.spec(), self.agg_specs(), self.group_by, self.lateness())
        except ConfigError as exc:
            msg = f"pipeline window `{self.name}`: {exc}"
            raise ConfigError(msg) from None
        return self

    def spec(self) -> WindowSpec:
        """The window as :mod:`thalweg_bytewax.windows.aggregate` takes it (``Tumbling`` ...)."""
        from thalweg_bytewax.windows.aggregate import Session, Sliding, Tumbling  # noqa: PLC0415

        if self.kind == "sliding":
            return Sliding(_seconds(self.length_s), _seconds(self.step_s))
        if self.kind == "session":
            return Session(_seconds(self.gap_s))
        return Tumbling(_seconds(self.size_s))

    def agg_specs(self) -> dict[str, tuple[str, str]]:
        """``aggs`` as the operator takes them: output column -> (function, column)."""
        return {out: (spec[0], spec[1]) for out, spec in self.aggs.items()}

    def lateness(self) -> timedelta:
        """``allowed_lateness_s`` as a duration."""
        return timedelta(seconds=self.allowed_lateness_s)

    def skew(self) -> timedelta:
        """``allowed_skew_s`` as a duration."""
        return timedelta(seconds=self.allowed_skew_s)


def _seconds(value: float | None) -> timedelta:
    return timedelta(seconds=value or 0.0)
