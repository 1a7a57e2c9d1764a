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

from thalweg_bytewax._lazy import lazy_reexports
from thalweg_bytewax.codecs.base import Codec as Codec
from thalweg_bytewax.codecs.base import DecodeFailure as DecodeFailure
from thalweg_bytewax.codecs.base import DecodeResult as DecodeResult
from thalweg_bytewax.codecs.base import EncodedValues as EncodedValues
from thalweg_bytewax.codecs.base import EncodeError as EncodeError
from thalweg_bytewax.codecs.base import Encoder as Encoder
from thalweg_bytewax.codecs.base import FailureKind as FailureKind
from thalweg_bytewax.codecs.base import Framing as Framing

if TYPE_CHECKING:
    from thalweg_bytewax.codecs._avro_encode import AvroEncoder as AvroEncoder
    from thalweg_bytewax.codecs._bytes_encode import BytesEncoder as BytesEncoder
    from thalweg_bytewax.codecs._json_encode import JsonEncoder as JsonEncoder
    from thalweg_bytewax.codecs._proto_encode import ProtobufEncoder as ProtobufEncoder
    from thalweg_bytewax.codecs.avro import AvroCodec as AvroCodec
    from thalweg_bytewax.codecs.json import JsonCodec as JsonCodec
    from thalweg_bytewax.codecs.protobuf import ProtobufCodec as ProtobufCodec

__getattr__, __dir__ = lazy_reexports(globals())
