"""``PostgresSinkConfig``: the settings of a PostgreSQL sink, one frozen model.

:class:`~thalweg_bytewax.connectors.postgres.PostgresSink` builds it from its keywords, a
pipeline builds it from a ``[sinks.<name>]`` table with ``kind = "postgres"``, and the
sink's table and partitions read only it. The DSN is a secret
(:class:`~thalweg_bytewax.config.SecretRef`): ``repr``, ``str``, logs and ``thalweg config
show`` print its references (or ``***``), never a password. A ``contract`` and a
``coverage_store`` object are arguments of the sink, not settings.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from thalweg_bytewax.config import ConnectorConfig, Duration, SecretRef
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns

from .._settings import MetadataPrefix

__all__ = ["PostgresSinkConfig", "WriteMode"]

WriteMode = Literal["append", "upsert"]
"""``append`` inserts every row; ``upsert`` replaces rows by key."""


class PostgresSinkConfig(ConnectorConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.postgres.PostgresSink`.

    The schema is written ``schema`` (in Python keywords and TOML) and read as
    :attr:`db_schema` (pydantic models own a ``schema`` attribute).

    Example:
        >>> cfg = PostgresSinkConfig.build(
        ...     {"dsn": "postgresql://app:${env:PG_PASSWORD}@db/shop", "table": "orders"}
        ... )
        >>> cfg.dsn
        SecretRef('postgresql://app:${env:PG_PASSWORD}@db/shop')
        >>> cfg.db_schema, cfg.retry_backoff
        ('public', datetime.timedelta(microseconds=500000))
    """

    model_config = ConfigDict(**ConnectorConfig.model_config, serialize_by_alias=True)

    component: ClassVar[str] = "postgres sink"

    dsn: SecretRef
    """A libpq connection URI (`postgresql://user@host/db`), a secret: write the password
    as a reference (`${env:PG_PASSWORD}`) or the whole DSN as one (`${env:PG_DSN}`)."""
    table: str = Field(min_length=1)
    """The table name (unquoted; validated, then quoted)."""
    db_schema: str = Field(default="public", alias="schema", min_length=1)
    """The schema of the table and of its `_twg_coverage` table."""
    mode: WriteMode = "append"
    """`append` inserts every row; `upsert` replaces rows by `key_columns` (else the
    contract's primary key)."""
    key_columns: tuple[str, ...] = ()
    """The upsert key; needs a unique constraint (added when the sink creates the table)."""
    metadata: Literal["none", "locator", "all"] = "locator"
    """Which metadata columns are written: `locator` (topic, partition, offset, record
    id), `all` or `none`."""
    allow_widening: bool = False
    """Widen columns losslessly (e.g. `integer` to `bigint`) instead of refusing."""
    conversions: dict[str, Literal["json", "utc", "truncate"]] = Field(default_factory=dict)
    """Per-column opt-ins for a change that is not lossless by type (`json`, `utc`,
    `truncate`)."""
    identifiers: Literal["strict", "relaxed"] = "strict"
    """`strict` (lowercase names that need no quoting) or `relaxed` (any name, quoted)."""
    sink_name: str | None = None
    """The name of this sink in the coverage table (default `<schema>.<table>`)."""
    shards: int = Field(default=16, ge=1)
    """Sink partitions the topic-partitions are spread over."""
    max_retries: int = Field(default=5, ge=0)
    """Retries of an epoch's transaction on transient failures."""
    retry_backoff: Duration = Field(default=timedelta(seconds=0.5), ge=timedelta(0))
    """The first retry's delay (seconds, or ISO-8601); each next one doubles it."""
    max_backoff: Duration = Field(default=timedelta(seconds=10), ge=timedelta(0))
    """The longest delay between retries."""
    connect_timeout: Duration = Field(default=timedelta(seconds=10), ge=timedelta(0))
    """The connection timeout of both clients."""
    network_timeout: Duration = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """How long a connection may stay silent at the TCP level (sent bytes unacknowledged,
    keepalives unanswered) before the client declares it dead: libpq's `keepalives`,
    `keepalives_idle`, `keepalives_interval`, `keepalives_count` and `tcp_user_timeout`
    of both clients (a DSN that sets one keeps its own)."""
    write_timeout: Duration = Field(default=timedelta(minutes=5), gt=timedelta(0))
    """The longest one call on a shard's data connection may take: a partition's coverage
    read, or an attempt at an epoch's whole transaction (connect, COPY, COMMIT). Past it
    the attempt is abandoned as a transient failure and retried on a new connection; size
    it above the write of your largest epoch."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
    locators: Literal["required", "absent"] = "required"
    """`required` (rows carry `_twg_source_*` locators: exactly once) or `absent` (rows
    without them: at-least-once appends, effectively-once upserts)."""

    @field_validator("dsn")
    @classmethod
    def _uri(cls, value: SecretRef) -> SecretRef:
        if value.references:
            return value  # checked where it is resolved, never read at load
        if "://" not in value.resolve():  # a plain value: nothing to look up
            msg = "expected a libpq URI (postgresql://user@host/db); got no URI"
            raise ValueError(msg)
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        return str(value) if isinstance(value, str) else value  # a MetadataPolicy member

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)

    @property
    def target(self) -> str:
        """``<schema>.<table>``, as messages name the table."""
        return f"{self.db_schema}.{self.table}"
