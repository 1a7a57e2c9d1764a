"""Codecs: Avro, Protobuf and JSON payloads into dicts or Arrow batches, and back.

Each codec offers ``decode_value`` (record-at-a-time) and ``decode_batch`` (columnar)
over one schema-resolution core; each encoder offers ``encode_batch`` (Arrow batch to
one framed payload per row); see :mod:`thalweg_bytewax.codecs.base`.

The names below load their module on first use: a flow that decodes JSON loads neither
the Avro nor the Protobuf machinery, and only the encoders load confluent-kafka's
schema-registry client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package
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

if TYPE_CHECKING:
    from thalweg_bytewax.codecs._avro_encode import AvroEncoder
    from thalweg_bytewax.codecs._bytes_encode import BytesEncoder
    from thalweg_bytewax.codecs._json_encode import JsonEncoder
    from thalweg_bytewax.codecs._proto_encode import ProtobufEncoder
    from thalweg_bytewax.codecs.avro import AvroCodec
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

# Public name -> the module that defines it, imported on first access.
_LAZY = {
    "AvroCodec": "thalweg_bytewax.codecs.avro",
    "AvroEncoder": "thalweg_bytewax.codecs._avro_encode",
    "BytesEncoder": "thalweg_bytewax.codecs._bytes_encode",
    "JsonCodec": "thalweg_bytewax.codecs.json",
    "JsonEncoder": "thalweg_bytewax.codecs._json_encode",
    "ProtobufCodec": "thalweg_bytewax.codecs.protobuf",
    "ProtobufEncoder": "thalweg_bytewax.codecs._proto_encode",
}

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())
