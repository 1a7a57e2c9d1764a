"""Peel schema framing off payloads without destroying the envelope.

Two framings carry a schema reference:

* **Confluent wire format**: magic byte ``0``, a 4-byte big-endian schema id, then for
  Protobuf the message-index array (zigzag varints: a count then that many indexes; the
  single byte ``0x00`` means "the first message", ``[0]``), then the body.
* **Header framing** (confluent-kafka >= 2.16): the payload is the bare body and the
  schema GUID travels in a ``__value_schema_id`` (or ``__key_schema_id``) header whose
  value is magic byte ``1`` + 16-byte GUID (+ the Protobuf message indexes).

Peeling returns where the body starts; the payload bytes themselves are never changed,
so the raw lane keeps the envelope.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs._wire import varint
from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import DecodeError

__all__ = [
    "KEY_SCHEMA_ID_HEADER",
    "MAGIC_ID",
    "MAGIC_GUID",
    "VALUE_SCHEMA_ID_HEADER",
    "FramingError",
    "SchemaRef",
    "encode_confluent",
    "encode_message_indexes",
    "find_schema_header",
    "peel",
    "peel_confluent",
    "peel_confluent_batch",
    "peel_header",
]

MAGIC_ID = 0
"""Magic byte of the Confluent wire format with a 4-byte schema id."""
MAGIC_GUID = 1
"""Magic byte of a header-carried schema GUID."""
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
"""Header that carries a value's schema GUID under header framing."""
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
"""Header that carries a key's schema GUID under header framing."""

_MAX_INDEXES = 100_000  # the bound confluent-kafka's own deserializer enforces


class FramingError(DecodeError):
    """A payload's framing is invalid: wrong magic byte, truncated, bad index array."""

    default_kind = FailureKind.BAD_FRAMING


@dataclass(frozen=True, slots=True)
class SchemaRef:
    """The schema reference peeled from one payload and where its body starts.

    Exactly one of ``schema_id`` and ``guid`` is set. ``message_indexes`` is set for
    Protobuf only (``(0,)`` is the first message of the schema).
    """

    body_offset: int
    schema_id: int | None = None
    guid: uuid.UUID | None = None
    message_indexes: tuple[int, ...] | None = None

    @property
    def key(self) -> int | str:
        """A hashable key to group payloads by writer schema."""
        if self.schema_id is not None:
            return self.schema_id
        return str(self.guid)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            msg = f"truncated message-index varint at byte {pos}"
            raise FramingError(msg)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
        if shift > 63:
            msg = f"message-index varint longer than 10 bytes at byte {pos}"
            raise FramingError(msg)
    return (value >> 1) ^ -(value & 1), pos


def _read_indexes(buf: bytes | memoryview, pos: int) -> tuple[tuple[int, ...], int]:
    count, pos = _read_varint(buf, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > _MAX_INDEXES:
        msg = f"invalid message-index array length {count} at byte {pos}"
        raise FramingError(msg)
    indexes = []
    for _ in range(count):
        idx, pos = _read_varint(buf, pos)
        if idx < 0:
            msg = f"negative message index {idx} before byte {pos}"
            raise FramingError(msg)
        indexes.append(idx)
    return tuple(indexes), pos


def peel_confluent(payload: bytes, *, protobuf: bool = False) -> SchemaRef:
    """Read the Confluent wire-format prefix of ``payload``.

    Args:
        payload: The framed payload.
        protobuf: Also read the Protobuf message-index array after the schema id.

    Returns:
        The schema id (and message indexes) and the offset where the body starts.

    Raises:
        FramingError: On a wrong magic byte or a payload too short for its framing.
    """
    if len(payload) < 5:
        msg = f"payload of {len(payload)} bytes is too short for Confluent framing (needs 5)"
        raise FramingError(msg)
    if payload[0] != MAGIC_ID:
        msg = f"expected Confluent magic byte 0; got {payload[0]}"
        raise FramingError(msg)
    schema_id = struct.unpack_from(">I", payload, 1)[0]
    if not protobuf:
        return SchemaRef(body_offset=5, schema_id=schema_id)
    indexes, pos = _read_indexes(payload, 5)
    return SchemaRef(body_offset=pos, schema_id=schema_id, message_indexes=indexes)


def find_schema_header(
    headers: Sequence[tuple[str, bytes | None]] | None, *, key: bool = False
) -> bytes | None:
    """The value of the schema-GUID header (first occurrence), or ``None``."""
    if not headers:
        return None
    name = KEY_SCHEMA_ID_HEADER if key else VALUE_SCHEMA_ID_HEADER
    for h_name, h_value in headers:
        if h_name == name:
            return h_value
    return None


def peel_header(header_value: bytes, *, protobuf: bool = False) -> SchemaRef:
    """Read a header-framing value (magic 1 + GUID [+ message indexes]); body is at 0."""
    if len(header_value) < 17 or header_value[0] != MAGIC_GUID:
        msg = (
            f"schema-id header: expected magic byte 1 and a 16-byte GUID; got "
            f"{len(header_value)} bytes starting with {header_value[:1]!r}"
        )
        raise FramingError(msg)
    guid = uuid.UUID(bytes=bytes(header_value[1:17]))
    indexes = None
    if protobuf:
        indexes, _ = _read_indexes(header_value, 17)
    return SchemaRef(body_offset=0, guid=guid, message_indexes=indexes)


def peel(
    payload: bytes,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    *,
    protobuf: bool = False,
    key: bool = False,
) -> SchemaRef:
    """Peel either framing: a schema-GUID header wins, else the payload prefix.

    This is the order confluent-kafka's ``dual_schema_id_deserializer`` uses.
    """
    header_value = find_schema_header(headers, key=key)
    if header_value is not None:
        return peel_header(header_value, protobuf=protobuf)
    return peel_confluent(payload, protobuf=protobuf)


def peel_confluent_batch(payloads: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Columnar Confluent peel (no Protobuf indexes) for a binary array.

    Args:
        payloads: A ``binary`` or ``large_binary`` array.

    Returns:
        ``(schema_ids, ok)``: ``int64`` schema ids (``-1`` where not framed) and a
        boolean mask of rows with valid framing (non-null, >= 5 bytes, magic 0).
    """
    if pa.types.is_large_binary(payloads.type):
        payloads = payloads.cast(pa.binary())
    n = len(payloads)
    ids = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return ids, np.zeros(0, dtype=bool)
    # Straight from the Arrow buffers: one gather per header byte, no per-row objects
    # and no intermediate Arrow arrays.
    _, offsets_buf, data_buf = payloads.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[payloads.offset : payloads.offset + n + 1]
    ok = np.diff(offsets) >= 5
    if payloads.null_count:
        ok &= payloads.is_valid().to_numpy(zero_copy_only=False)
    if data_buf is None or not ok.any():  # no buffer: every value is empty
        return ids, ok & (data_buf is not None)
    data = np.frombuffer(data_buf, dtype=np.uint8)
    rows = np.flatnonzero(ok)
    starts = offsets[rows].astype(np.int64)
    framed = data[starts] == 0
    if not framed.all():
        ok[rows[~framed]] = False
        rows, starts = rows[framed], starts[framed]
    head = data[starts[:, None] + np.arange(1, 5)].astype(np.int64)
    ids[rows] = (head[:, 0] << 24) | (head[:, 1] << 16) | (head[:, 2] << 8) | head[:, 3]
    return ids, ok


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """Encode a Protobuf message-index array (``[0]`` encodes as the single byte 0)."""
    if list(indexes) == [0]:
        return b"\x00"
    return b"".join(varint((v << 1) ^ (v >> 63)) for v in (len(indexes), *indexes))  # zigzag


def encode_confluent(
    schema_id: int, body: bytes, *, message_indexes: Sequence[int] | None = None
) -> bytes:
    """Frame ``body`` in the Confluent wire format (for producers, tests and samples)."""
    head = struct.pack(">bI", MAGIC_ID, schema_id)
    if message_indexes is not None:
        head += encode_message_indexes(message_indexes)
    return head + body
