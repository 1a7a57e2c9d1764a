"""Codecs: Avro, Protobuf and JSON payloads into dicts or Arrow batches.

Each codec offers ``decode_value`` (record-at-a-time) and ``decode_batch`` (columnar)
over one schema-resolution core; see :mod:`thalweg_bytewax.codecs.base`.
"""

from __future__ import annotations

from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.base import (
    Codec,
    DecodeFailure,
    DecodeResult,
    FailureKind,
    Framing,
)
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.codecs.protobuf import ProtobufCodec

__all__ = [
    "AvroCodec",
    "Codec",
    "DecodeFailure",
    "DecodeResult",
    "FailureKind",
    "Framing",
    "JsonCodec",
    "ProtobufCodec",
]
