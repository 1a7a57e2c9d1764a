"""Every codec refuses an unknown framing the same way, naming itself and the choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from thalweg_bytewax.codecs import AvroCodec, JsonCodec, ProtobufCodec
from thalweg_bytewax.dev.samples import ORDER_JSON_SCHEMA, ORDER_MESSAGE_TYPE, order_descriptor_set
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.registry import DirectorySchemaSource

SCHEMAS = Path(__file__).resolve().parents[2] / "thalweg_bytewax" / "flows" / "schemas"


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("avro", lambda f: AvroCodec(DirectorySchemaSource(SCHEMAS), framing=f)),
        ("json", lambda f: JsonCodec(ORDER_JSON_SCHEMA, framing=f)),
        (
            "protobuf",
            lambda f: ProtobufCodec(
                descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE, framing=f
            ),
        ),
    ],
)
def test_unknown_framing_is_a_config_error(name, build) -> None:
    with pytest.raises(
        ConfigError, match=rf"{name} codec: expected framing `confluent` or `none`; got 'magic'"
    ):
        build("magic")
    build("confluent")  # a known framing is accepted
