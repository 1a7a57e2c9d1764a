"""The codec and encoder protocols, and the shapes of a decode failure and an encode.

A codec turns payload bytes into one of two representations over one schema-resolution
core, so both agree on every record:

* ``decode_value(payload) -> dict`` — record-at-a-time;
* ``decode_batch(payloads) -> DecodeResult(batch, errors)`` — columnar, over a
  ``pyarrow.BinaryArray`` (or a sequence of ``bytes | None``).

The third representation, bytes passthrough, needs no codec at all: the RawBatch keeps
the payload with its envelope intact. Framing (Confluent wire format, a schema id in a
header, or none) is peeled by :mod:`thalweg_bytewax.codecs.framing`, never destructively.

The other direction is an :class:`Encoder`: ``encode_batch(batch, topic=...)`` turns an
Arrow batch into one payload per row (:class:`EncodedValues`), framed the way the
decoders read it. A row that does not fit the schema raises :class:`EncodeError`
naming the column and row; nothing is silently written as null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

import pyarrow as pa

from thalweg_bytewax._choices import parse_enum
from thalweg_bytewax.errors import ConfigError, FailureKind, ThalwegError

__all__ = [
    "Codec",
    "DecodeFailure",
    "DecodeResult",
    "EncodeError",
    "EncodedValues",
    "Encoder",
    "FailureKind",
    "Framing",
    "HeadersInput",
    "PayloadsInput",
    "check_headers",
    "check_payload",
    "check_payloads",
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


def parse_framing(value: Framing | str, codec: str) -> Framing:
    """``value`` as a :class:`Framing`, or a ``ConfigError`` naming the codec and choices.

    Raises:
        ConfigError: When ``value`` is not a known framing.
    """
    return parse_enum(Framing, value, where=f"{codec} codec", argument="framing")


# Arrow payload types a codec takes, and the binary type each is read as (zero-copy for
# the string types: UTF-8 text is bytes).
_AS_BINARY = {
    pa.binary(): pa.binary(),
    pa.large_binary(): pa.large_binary(),
    pa.string(): pa.binary(),
    pa.large_string(): pa.large_binary(),
    pa.binary_view(): pa.binary(),
    pa.string_view(): pa.binary(),
    pa.null(): pa.binary(),
}
_BYTES_LIKE = (bytes, bytearray, memoryview)
_NOT_A_SEQUENCE = (str, bytes, bytearray, memoryview, Mapping)


def _shown(value: object) -> str:
    """A short description of a wrong argument: its type, and its value when scalar."""
    if isinstance(value, pa.Array | pa.ChunkedArray):
        return f"a {type(value).__name__} of `{value.type}`"
    text = repr(value)
    short = text if len(text) <= 40 else f"{text[:37]}..."
    return f"{type(value).__name__} {short}"


def check_payloads(payloads: object, codec: str) -> pa.Array | pa.ChunkedArray:
    """``payloads`` as a binary Arrow array, or a ``ConfigError`` naming the argument.

    Takes a ``BinaryArray``, ``LargeBinaryArray`` or a ``ChunkedArray`` of either (string
    and view arrays and all-null arrays are read as binary), or a sequence of
    ``bytes | bytearray | memoryview | str | None``, which is converted in one call.

    Args:
        payloads: What a caller passed to ``decode_batch``.
        codec: The codec name, for the message.

    Raises:
        ConfigError: When ``payloads`` is anything else.
    """
    if isinstance(payloads, pa.Array | pa.ChunkedArray):
        target = _AS_BINARY.get(payloads.type)
        if target is None:
            msg = (
                f"{codec} codec: `payloads` expected a binary Arrow array (binary or "
                f"large_binary, or a ChunkedArray of them); got {_shown(payloads)}; cast "
                f"the column or pass the raw payload column"
            )
            raise ConfigError(msg)
        return payloads if payloads.type == target else payloads.cast(target)
    if isinstance(payloads, _NOT_A_SEQUENCE) or not isinstance(payloads, Sequence):
        msg = (
            f"{codec} codec: `payloads` expected a binary Arrow array or a sequence of bytes "
            f"(a list, even for one payload); got {_shown(payloads)}"
        )
        raise ConfigError(msg)
    try:
        return pa.array(payloads, pa.binary())
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError, ValueError) as exc:
        bad = next(
            (
                (i, v)
                for i, v in enumerate(payloads)
                if v is not None and not isinstance(v, (*_BYTES_LIKE, str))
            ),
            None,
        )
        where = f"{_shown(bad[1])} at index {bad[0]}" if bad else type(exc).__name__
        msg = f"{codec} codec: `payloads` expected bytes or None at every index; got {where}"
        raise ConfigError(msg) from exc


def check_payload(payload: object, codec: str, *, text: bool = False) -> None:
    """A ``ConfigError`` unless ``payload`` is bytes-like or ``None`` (``str`` if ``text``).

    Args:
        payload: What a caller passed to ``decode_value``.
        codec: The codec name, for the message.
        text: Whether a ``str`` is a payload too (JSON text).

    Raises:
        ConfigError: When ``payload`` is anything else.
    """
    kinds = (*_BYTES_LIKE, str) if text else _BYTES_LIKE
    if payload is None or isinstance(payload, kinds):
        return
    expected = "bytes, str or None" if text else "bytes or None"
    msg = f"{codec} codec: `payload` expected {expected}; got {_shown(payload)}"
    raise ConfigError(msg)


def _header_row_ok(row: object) -> bool:
    if row is None:
        return True
    if isinstance(row, _NOT_A_SEQUENCE) or not isinstance(row, Sequence):
        return False
    for pair in row:
        if isinstance(pair, Mapping):
            key, value = pair.get("key"), pair.get("value")
        elif isinstance(pair, Sequence) and not isinstance(pair, _NOT_A_SEQUENCE):
            if len(pair) != 2:  # noqa: PLR2004 - a (key, value) pair
                return False
            key, value = pair
        else:
            return False
        if not isinstance(key, str) or not (value is None or isinstance(value, _BYTES_LIKE)):
            return False
    return True


def check_headers(headers: object, codec: str) -> None:
    """A ``ConfigError`` unless ``headers`` has the shape ``decode_batch`` takes.

    That is ``None``, a list-typed Arrow column (the RawBatch headers), or a sequence
    whose rows are ``None`` or ``(str, bytes | None)`` pairs (or key/value dicts). An
    Arrow column is checked by type only (constant time, the hot path); a Python
    sequence row by row.

    Args:
        headers: What a caller passed as ``headers=``.
        codec: The codec name, for the message.

    Raises:
        ConfigError: When ``headers`` is anything else.
    """
    if headers is None:
        return
    if isinstance(headers, pa.Array | pa.ChunkedArray):
        t = headers.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_null(t):
            return
        bad = _shown(headers)
    elif isinstance(headers, _NOT_A_SEQUENCE) or not isinstance(headers, Sequence):
        bad = _shown(headers)
    else:
        row = next(((i, r) for i, r in enumerate(headers) if not _header_row_ok(r)), None)
        if row is None:
            return
        bad = f"row {row[0]} {_shown(row[1])}"
    msg = (
        f"{codec} codec: `headers` expected None, the RawBatch headers column or one list "
        f"of (str, bytes | None) pairs per payload; got {bad}"
    )
    raise ConfigError(msg)


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


class EncodeError(ThalwegError):
    """A row of a batch does not fit the encoder's schema; the message names column and row.

    Terminal: the same batch fails the same way on every retry. Raised by
    :meth:`Encoder.encode_batch` for the whole batch (a sink must not write part of it).

    Args:
        message: What failed, in the error-message grammar.
        column: The offending column (a dotted path inside nested values), where known.
        row: The offending row index in the batch, where known.

    Attributes:
        column: The offending column, or ``None``.
        row: The offending row index, or ``None``.
    """

    __module__ = "thalweg_bytewax.codecs"

    def __init__(self, message: str, column: str | None = None, row: int | None = None) -> None:
        super().__init__(message, column, row)
        self.column = column
        self.row = row


@dataclass(frozen=True)
class EncodedValues:
    """What :meth:`Encoder.encode_batch` returns: one payload per input row, in order.

    Attributes:
        values: One payload per row; a null is a tombstone (a record with a null value).
        headers: Extra Kafka headers per row (header schema-id framing puts the schema
            GUID in ``__value_schema_id``), or ``None`` when the encoder adds none.
    """

    values: pa.BinaryArray
    headers: list[list[tuple[str, bytes]]] | None = None


@runtime_checkable
class Encoder(Protocol):
    """An Arrow batch in, one Kafka value per row out.

    Implemented by ``AvroEncoder``, ``ProtobufEncoder``, ``JsonEncoder`` and
    ``BytesEncoder``. An encoder may look schemas up (or register them) in a registry
    on the first batch for a topic; a registry outage raises
    :class:`~thalweg_bytewax.registry.RegistryUnavailableError` (transient).
    """

    @property
    def name(self) -> str:
        """Short encoder name for logs and messages (``avro``, ``protobuf``, ``json``)."""
        ...

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:
        """Encode every row of ``batch`` for ``topic`` (the topic picks the subject).

        Raises:
            EncodeError: When a row does not fit the schema (names column and row).
        """
        ...
