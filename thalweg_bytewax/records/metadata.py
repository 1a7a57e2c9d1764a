"""The canonical ``_twg_`` metadata columns and the metadata policy.

Source-provided columns are named ``<prefix>source_*`` and form one transport-neutral
superset (a column is null where a transport does not supply it). Columns that
thalweg-bytewax stamps itself carry no ``source`` infix: ``<prefix>ingest_ts``,
``<prefix>record_id`` and ``<prefix>emit_ts``. The prefix is configurable (default
``_twg_``) and must not change once a target exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

import pyarrow as pa

from thalweg_bytewax._choices import parse_enum
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.ids import RECORD_ID_BYTES

__all__ = [
    "DEFAULT_COLUMNS",
    "DEFAULT_PREFIX",
    "METADATA_DESCRIPTIONS",
    "MetadataColumns",
    "MetadataPolicy",
    "metadata_columns",
]

DEFAULT_PREFIX = "_twg_"
"""The default metadata column prefix."""

_PREFIX_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,30}$")
_HEADER_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)
_UTC_MS = pa.timestamp("ms", tz="UTC")
_UTC_US = pa.timestamp("us", tz="UTC")


class MetadataPolicy(StrEnum):
    """Which metadata columns a decoded lane keeps next to the payload columns.

    The raw lane always carries the full set; the policy governs decoded lanes only.
    """

    NONE = "none"
    """Payload columns only."""
    LOCATOR = "locator"
    """Topic, partition, offset and record id: enough to trace and deduplicate."""
    ALL = "all"
    """Every metadata column except the raw key and value bytes."""


@dataclass(frozen=True)
class MetadataColumns:
    """The metadata column names under one prefix, and the raw-lane Arrow schema.

    Args:
        prefix: The reserved column prefix. Letters, digits and underscores, starting
            with a letter or underscore, at most 31 characters.

    Raises:
        ConfigError: When the prefix is not a safe identifier.
    """

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not _PREFIX_PATTERN.match(self.prefix):
            msg = (
                f"metadata prefix: expected letters, digits and underscores starting with a "
                f"letter or underscore (at most 31 characters); got {self.prefix!r}"
            )
            raise ConfigError(msg)

    # Source-provided (transport-neutral superset).
    @property
    def source_cluster(self) -> str:
        """Cluster id where the transport reports one."""
        return f"{self.prefix}source_cluster"

    @property
    def source_topic(self) -> str:
        """Topic (file sources: the file path)."""
        return f"{self.prefix}source_topic"

    @property
    def source_partition(self) -> str:
        """Partition number."""
        return f"{self.prefix}source_partition"

    @property
    def source_offset(self) -> str:
        """Kafka offset (file sources: the row index)."""
        return f"{self.prefix}source_offset"

    @property
    def source_leader_epoch(self) -> str:
        """Leader epoch of the fetched record, where known."""
        return f"{self.prefix}source_leader_epoch"

    @property
    def source_key(self) -> str:
        """Record key bytes; null and empty are distinct."""
        return f"{self.prefix}source_key"

    @property
    def source_value(self) -> str:
        """Payload bytes with any envelope intact; null is a tombstone."""
        return f"{self.prefix}source_value"

    @property
    def source_timestamp(self) -> str:
        """The record timestamp (UTC, milliseconds)."""
        return f"{self.prefix}source_timestamp"

    @property
    def source_timestamp_type(self) -> str:
        """``CreateTime``, ``LogAppendTime`` or ``NotAvailable``."""
        return f"{self.prefix}source_timestamp_type"

    @property
    def source_headers(self) -> str:
        """Ordered headers; duplicate keys and null values kept."""
        return f"{self.prefix}source_headers"

    @property
    def source_producer_id(self) -> str:
        """Producer id of the record batch, where the client exposes it."""
        return f"{self.prefix}source_producer_id"

    @property
    def source_producer_epoch(self) -> str:
        """Producer epoch of the record batch, where the client exposes it."""
        return f"{self.prefix}source_producer_epoch"

    @property
    def source_base_sequence(self) -> str:
        """Base sequence of the record batch, where the client exposes it."""
        return f"{self.prefix}source_base_sequence"

    # Thalweg-stamped.
    @property
    def ingest_ts(self) -> str:
        """When the source read the record."""
        return f"{self.prefix}ingest_ts"

    @property
    def record_id(self) -> str:
        """Deterministic 128-bit id of the record (see :func:`record_id`)."""
        return f"{self.prefix}record_id"

    @property
    def emit_ts(self) -> str:
        """When a sink wrote the record."""
        return f"{self.prefix}emit_ts"

    @cached_property
    def raw_schema(self) -> pa.Schema:
        """The Arrow schema of a RawBatch: the full column set, in canonical order."""
        p = self.prefix
        return pa.schema(
            [
                pa.field(self.source_cluster, pa.string()),
                pa.field(self.source_topic, pa.string(), nullable=False),
                pa.field(self.source_partition, pa.int32(), nullable=False),
                pa.field(self.source_offset, pa.int64(), nullable=False),
                pa.field(self.source_leader_epoch, pa.int32()),
                pa.field(self.source_key, pa.binary()),
                pa.field(self.source_value, pa.binary()),
                pa.field(self.source_timestamp, _UTC_MS),
                pa.field(self.source_timestamp_type, pa.string(), nullable=False),
                pa.field(self.source_headers, _HEADER_TYPE),
                pa.field(self.source_producer_id, pa.int64()),
                pa.field(self.source_producer_epoch, pa.int16()),
                pa.field(self.source_base_sequence, pa.int32()),
                # Reserved for Pulsar (ADR-0058); always null for Kafka and files.
                pa.field(f"{p}source_message_id", pa.binary()),
                pa.field(f"{p}source_producer_name", pa.string()),
                pa.field(f"{p}source_sequence_id", pa.int64()),
                pa.field(f"{p}source_ordering_key", pa.binary()),
                pa.field(f"{p}source_redelivery_count", pa.int32()),
                pa.field(self.ingest_ts, _UTC_US, nullable=False),
                pa.field(self.record_id, pa.binary(RECORD_ID_BYTES), nullable=False),
                pa.field(self.emit_ts, _UTC_US),
            ]
        )

    @cached_property
    def names(self) -> frozenset[str]:
        """Every reserved metadata column name."""
        return frozenset(self.raw_schema.names)

    def locator_columns(self) -> list[str]:
        """The columns :attr:`MetadataPolicy.LOCATOR` keeps."""
        return [self.source_topic, self.source_partition, self.source_offset, self.record_id]

    def policy_columns(self, policy: MetadataPolicy | str) -> list[str]:
        """The metadata columns a decoded lane keeps under ``policy``, in schema order."""
        policy = parse_enum(MetadataPolicy, policy, where="metadata", argument="policy")
        if policy is MetadataPolicy.NONE:
            return []
        if policy is MetadataPolicy.LOCATOR:
            return self.locator_columns()
        # ALL: everything but the payload bytes themselves, which a decoded lane replaces.
        return [n for n in self.raw_schema.names if n not in (self.source_key, self.source_value)]

    def is_reserved(self, name: str) -> bool:
        """Whether ``name`` falls under the reserved prefix."""
        return name.startswith(self.prefix)

    def descriptions(self) -> dict[str, str]:
        """The built-in column comment of every metadata column, by column name.

        Table sinks stamp these on the ``_twg_`` columns they create (a contract
        describes payload columns only).
        """
        return {self.prefix + suffix: text for suffix, text in METADATA_DESCRIPTIONS.items()}


METADATA_DESCRIPTIONS: dict[str, str] = {
    "source_cluster": "Source cluster id, where the transport reports one (thalweg metadata)",
    "source_topic": "Source topic; for file sources the file path (thalweg metadata)",
    "source_partition": "Source partition number (thalweg metadata)",
    "source_offset": "Source offset; for file sources the row index (thalweg metadata)",
    "source_leader_epoch": "Leader epoch of the fetched record, where known (thalweg metadata)",
    "source_key": "Record key bytes; null and empty are distinct (thalweg metadata)",
    "source_value": "Payload bytes with any envelope intact; null is a tombstone "
    "(thalweg metadata)",
    "source_timestamp": "Record timestamp, UTC (thalweg metadata)",
    "source_timestamp_type": "CreateTime, LogAppendTime or NotAvailable (thalweg metadata)",
    "source_headers": "Record headers in order, duplicates and null values kept (thalweg metadata)",
    "source_producer_id": "Producer id of the record batch, where exposed (thalweg metadata)",
    "source_producer_epoch": "Producer epoch of the record batch, where exposed (thalweg metadata)",
    "source_base_sequence": "Base sequence of the record batch, where exposed (thalweg metadata)",
    "source_message_id": "Pulsar message id; null for Kafka and files (thalweg metadata)",
    "source_producer_name": "Pulsar producer name; null for Kafka and files (thalweg metadata)",
    "source_sequence_id": "Pulsar sequence id; null for Kafka and files (thalweg metadata)",
    "source_ordering_key": "Pulsar ordering key; null for Kafka and files (thalweg metadata)",
    "source_redelivery_count": "Pulsar redelivery count; null for Kafka and files "
    "(thalweg metadata)",
    "ingest_ts": "When thalweg read the record, UTC (thalweg metadata)",
    "record_id": "Deterministic 128-bit record id: SHA-256 of source identity, offset and "
    "payload; the same record always gets the same id (thalweg metadata)",
    "emit_ts": "When a thalweg sink wrote the record, UTC (thalweg metadata)",
}
"""Built-in column comments of the metadata columns, by name without the prefix."""

DEFAULT_COLUMNS = MetadataColumns()
"""The metadata column names under :data:`DEFAULT_PREFIX`, the default everywhere."""


def metadata_columns(metadata_prefix: object, component: str) -> MetadataColumns:
    """The column names under a public ``metadata_prefix`` argument, checked.

    Every public constructor and operator spells the prefix argument
    ``metadata_prefix`` and builds its columns through this function.

    Args:
        metadata_prefix: The argument as given.
        component: Who asks, for the message, e.g. ``"kafka source"``.

    Raises:
        ConfigError: When the prefix is not a string that is a safe identifier.
    """
    if isinstance(metadata_prefix, str) and _PREFIX_PATTERN.match(metadata_prefix):
        if metadata_prefix == DEFAULT_PREFIX:
            return DEFAULT_COLUMNS
        return MetadataColumns(metadata_prefix)
    msg = (
        f"{component}: `metadata_prefix` expected letters, digits and underscores starting "
        f"with a letter or underscore (at most 31 characters); got {metadata_prefix!r}"
    )
    raise ConfigError(msg)
