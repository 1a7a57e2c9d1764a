"""Codecs: Avro, Protobuf and JSON payloads into dicts or Arrow batches, and back.

Each codec offers ``decode_value`` (record-at-a-time) and ``decode_batch`` (columnar)
over one schema-resolution core; each encoder offers ``encode_batch`` (Arrow batch to
one framed payload per row); see :mod:`thalweg_bytewax.codecs.base`.
"""

from __future__ import annotations

from thalweg_bytewax.codecs._avro_encode import AvroEncoder
from thalweg_bytewax.codecs._encode import BytesEncoder
from thalweg_bytewax.codecs._json_encode import JsonEncoder
from thalweg_bytewax.codecs._proto_encode import ProtobufEncoder
from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.base import (
    Codec,
    DecodeFailure,
    DecodeResult,
    EncodedValues,
    EncodeError,
    Encoder,
    FailureKind,
    Framing,
)
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.codecs.protobuf import ProtobufCodec

__all__ = [
    "AvroCodec",
    "AvroEncoder",
    "BytesEncoder",
    "Codec",
    "DecodeFailure",
    "DecodeResult",
    "EncodeError",
    "EncodedValues",
    "Encoder",
    "FailureKind",
    "Framing",
    "JsonCodec",
    "JsonEncoder",
    "ProtobufCodec",
    "ProtobufEncoder",
]
