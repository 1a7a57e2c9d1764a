"""Private: one Arrow batch of a ``KafkaSink`` as the arguments of its ``produce()`` calls.

Everything that can be done per column is done per column (encoding the values, the
key cast, the locator headers as bytes); what remains per record is the ``produce()``
call librdkafka's API forces (``produce_batch`` carries no headers). Every record
starts with the four locator headers, in this order, so the reconciliation on resume
finds them without scanning the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.metadata import MetadataColumns

try:  # the observability extra is optional: without it no trace context is sent
    from opentelemetry import propagate, trace
except ImportError:  # pragma: no cover - installed in the test environment
    propagate = None  # type: ignore[assignment]
    trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from thalweg_bytewax.codecs.base import Encoder

__all__ = [
    "HEADER_RECORD_ID",
    "HEADER_SOURCE_OFFSET",
    "HEADER_SOURCE_PARTITION",
    "HEADER_SOURCE_TOPIC",
    "LOCATOR_HEADERS",
    "Prepared",
    "prepare",
    "trace_headers",
]

logger = logging.getLogger(__name__)

HEADER_SOURCE_TOPIC = "_twg.source.topic"
"""Header: the source topic (file sources: the path) of the record, UTF-8."""
HEADER_SOURCE_PARTITION = "_twg.source.partition"
"""Header: the source partition, ASCII decimal."""
HEADER_SOURCE_OFFSET = "_twg.source.offset"
"""Header: the source offset, ASCII decimal."""
HEADER_RECORD_ID = "_twg.record_id"
"""Header: the 16-byte record id (absent when the batch carries none)."""
LOCATOR_HEADERS = (
    HEADER_SOURCE_TOPIC,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_OFFSET,
    HEADER_RECORD_ID,
)
"""The headers a ``KafkaSink`` puts first on every record, in this order."""

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Prepared:
    """The per-record arguments of one batch, as Python lists of equal length."""

    values: list[bytes | None]
    keys: list[bytes | None]
    headers: list[list[Header]]
    partitions: list[int] | None
    value_bytes: int


def _as_bytes(col: pa.Array | pa.ChunkedArray, what: str, component: str) -> list[Any]:
    """A column as a list of ``bytes | None`` (strings as UTF-8, numbers as decimal)."""
    t = col.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return list(col.to_pylist())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return list(col.cast(pa.binary()).to_pylist())
    if pa.types.is_integer(t):
        return list(col.cast(pa.string()).cast(pa.binary()).to_pylist())
    msg = (
        f"{component}: {what} expected a binary, string or integer column; got {t}; cast "
        f"it before the sink"
    )
    raise ConfigError(msg)


def _column(batch: pa.RecordBatch, name: str, what: str, component: str) -> pa.Array:
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        msg = (
            f"{component}: {what} names column `{name}`; expected one of "
            f"{batch.schema.names}; add the column or change the argument"
        )
        raise ConfigError(msg)
    return batch.column(idx)


def prepare(
    batch: pa.RecordBatch,
    *,
    topic: str,
    component: str,
    columns: MetadataColumns,
    encoder: Encoder | None,
    key: str | None,
    headers: Mapping[str, str],
    keep_source_headers: bool,
    by_source_partition: bool,
    trace: Sequence[Header] = (),
) -> Prepared:
    """Turn one batch of one source partition into per-record produce arguments.

    Raises:
        ConfigError: When a named column is missing or has an unusable type.
        EncodeError: When the encoder refuses a row (the whole batch is refused).
    """
    n = batch.num_rows
    names = batch.schema.names
    extra: list[list[Header]] | None = None
    if encoder is not None:
        encoded = encoder.encode_batch(batch, topic=topic)
        values: list[bytes | None] = list(encoded.values.to_pylist())
        if encoded.headers is not None:
            extra = [list(h) for h in encoded.headers]
    elif columns.source_value in names:
        values = _as_bytes(batch.column(columns.source_value), "the value", component)
    else:
        msg = (
            f"{component}: without an `encoder` batches need the raw payload column "
            f"`{columns.source_value}`; got columns {names}; pass an encoder (e.g. "
            f"`AvroEncoder`) or keep the raw value"
        )
        raise ConfigError(msg)
    if len(values) != n:
        msg = f"{component}: the encoder returned {len(values)} values; expected {n}"
        raise ConfigError(msg)
    value_bytes = int(pc.sum(pc.binary_length(pa.array(values, pa.binary()))).as_py() or 0)

    if key is not None:
        keys = _as_bytes(_column(batch, key, "`key`", component), f"key `{key}`", component)
    elif columns.source_key in names:
        keys = _as_bytes(batch.column(columns.source_key), "the key", component)
    else:
        keys = [None] * n

    per_column = [
        (name, _as_bytes(_column(batch, col, f"header `{name}`", component), name, component))
        for name, col in headers.items()
    ]
    source_headers = None
    if keep_source_headers and encoder is None and columns.source_headers in names:
        source_headers = batch.column(columns.source_headers).to_pylist()

    # The locator: one topic and partition per batch (the epoch sink splits by them).
    src_topic = str(batch.column(columns.source_topic)[0].as_py()).encode("utf-8")
    src_partition = int(batch.column(columns.source_partition)[0].as_py())
    part_b = str(src_partition).encode("ascii")
    offsets = batch.column(columns.source_offset).cast(pa.string()).cast(pa.binary()).to_pylist()
    rids: list[Any] = (
        batch.column(columns.record_id).to_pylist() if columns.record_id in names else [None] * n
    )
    out: list[list[Header]] = []
    append = out.append
    for i in range(n):
        row: list[Header] = [
            (HEADER_SOURCE_TOPIC, src_topic),
            (HEADER_SOURCE_PARTITION, part_b),
            (HEADER_SOURCE_OFFSET, offsets[i]),
        ]
        rid = rids[i]
        if rid is not None:
            row.append((HEADER_RECORD_ID, rid))
        if trace:
            row.extend(trace)
        if source_headers is not None:
            row.extend((h["key"], h["value"]) for h in source_headers[i] or ())
        if extra is not None:
            row.extend(extra[i])
        for name, vals in per_column:
            row.append((name, vals[i]))
        append(row)
    partitions = [src_partition] * n if by_source_partition else None
    return Prepared(values, keys, out, partitions, value_bytes)


def trace_headers() -> list[Header]:
    """The W3C trace context of the active span as Kafka headers, or none.

    Empty when OpenTelemetry is not installed or no span is recording, so a flow
    without tracing pays one import check per batch.
    """
    if trace is None or propagate is None:
        return []
    if not trace.get_current_span().get_span_context().is_valid:
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return [(k, v.encode("utf-8")) for k, v in carrier.items()]
