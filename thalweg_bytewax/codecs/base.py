"""The codec protocol every codec implements, and the shape of a decode failure.

A codec turns payload bytes into one of two representations over one schema-resolution
core, so both agree on every record:

* ``decode_value(payload) -> dict`` — record-at-a-time;
* ``decode_batch(payloads) -> DecodeResult(batch, errors)`` — columnar, over a
  ``pyarrow.BinaryArray`` (or a sequence of ``bytes | None``).

The third representation, bytes passthrough, needs no codec at all: the RawBatch keeps
the payload with its envelope intact. Framing (Confluent wire format, a schema id in a
header, or none) is peeled by :mod:`thalweg_bytewax.codecs.framing`, never destructively.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "Codec",
    "DecodeFailure",
    "DecodeResult",
    "FailureKind",
    "Framing",
    "HeadersInput",
    "PayloadsInput",
    "parse_framing",
]

PayloadsInput: TypeAlias = pa.Array | pa.ChunkedArray | Sequence[bytes | None]
"""Payloads for :meth:`Codec.decode_batch`: a binary Arrow array or a sequence of bytes."""

HeadersInput: TypeAlias = pa.Array | Sequence[Sequence[tuple[str, bytes | None]] | None] | None
"""Per-row Kafka headers (the RawBatch headers column, or tuples), used for header framing."""


class Framing(StrEnum):
    """How the schema id travels with a payload."""

    CONFLUENT = "confluent"
    """Confluent wire format: magic byte 0 + 4-byte big-endian schema id (+ Protobuf
    message indexes) in front of the body; or, as confluent-kafka >= 2.16 can produce,
    the schema GUID in a ``__value_schema_id`` / ``__key_schema_id`` header (magic byte
    1 + 16-byte GUID) and a bare body. Both are accepted."""
    NONE = "none"
    """A bare body decoded with the codec's one configured schema."""


class FailureKind(StrEnum):
    """Stable short codes for why one payload failed to decode."""

    NULL_PAYLOAD = "null_payload"
    """A tombstone (null value) reached a decoder."""
    BAD_FRAMING = "bad_framing"
    """Wrong magic byte, or too short to hold the framing."""
    UNKNOWN_SCHEMA = "unknown_schema"
    """The schema id or GUID is not known to the registry."""
    MALFORMED = "malformed"
    """The body is corrupt or truncated, or not valid for its writer schema."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """The record decoded but cannot be resolved to the output schema."""
    RESERVED_FIELD = "reserved_field"
    """The payload has a field under the reserved metadata prefix."""


def parse_framing(value: Framing | str, codec: str) -> Framing:
    """``value`` as a :class:`Framing`, or a ``ConfigError`` naming the codec and choices.

    Raises:
        ConfigError: When ``value`` is not a known framing.
    """
    try:
        return Framing(value)
    except ValueError as exc:
        choices = " or ".join(f"`{f.value}`" for f in Framing)
        msg = f"{codec} codec: expected framing {choices}; got {value!r}"
        raise ConfigError(msg) from exc


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """One payload that failed to decode: its row index, a code and a message.

    The message says what is wrong and where inside the payload (schema id, field path,
    byte position where known); the operator adds the record's locator.
    """

    index: int
    kind: FailureKind
    message: str


class DecodeResult(NamedTuple):
    """What :meth:`Codec.decode_batch` returns.

    ``batch`` holds one row per successfully decoded payload, in input order, i.e. the
    input rows minus those named in ``errors``; ``errors`` is sorted by index.
    """

    batch: pa.RecordBatch
    errors: list[DecodeFailure]

    def ok_indices(self, num_inputs: int) -> pa.Array:
        """Input row indices of the rows in ``batch`` (the complement of ``errors``)."""
        if not self.errors:
            return pa.array(range(num_inputs), pa.int64())
        bad = {e.index for e in self.errors}
        return pa.array([i for i in range(num_inputs) if i not in bad], pa.int64())


@runtime_checkable
class Codec(Protocol):
    """The protocol shared by ``AvroCodec``, ``ProtobufCodec`` and ``JsonCodec``.

    A codec may also have a ``concurrent_batches`` property: when it is true,
    :func:`thalweg_bytewax.operators.decode` may call ``decode_batch`` from several
    threads at once (the codec keeps no state between batches and releases the GIL).
    """

    @property
    def name(self) -> str:
        """Short codec name for logs, metrics and DLQ messages (``avro``, ``protobuf``)."""
        ...

    @property
    def arrow_schema(self) -> pa.Schema:
        """The exact Arrow schema ``decode_batch`` produces (current schema id / type)."""
        ...

    def decode_value(
        self, payload: bytes, *, headers: Sequence[tuple[str, bytes | None]] | None = None
    ) -> dict[str, Any]:
        """Decode one payload to a dict; raises ``DecodeError`` on failure."""
        ...

    def decode_batch(
        self, payloads: PayloadsInput, *, headers: HeadersInput = None
    ) -> DecodeResult:
        """Decode many payloads to one Arrow batch plus per-row failures.

        Never raises for bad data; an unreachable registry still raises.
        """
        ...
