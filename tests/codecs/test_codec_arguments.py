"""Wrong arguments to a public codec or record-id entry point raise ``ConfigError`` only.

Never a raw ``TypeError``, ``struct.error`` or Arrow error, and never silently accepted
(a ``str`` or ``bytes`` passed as the whole batch used to be iterated element by element).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.base import Codec
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.codecs.protobuf import ProtobufCodec
from thalweg_bytewax.dev.samples import ORDER_MESSAGE_TYPE, order_descriptor_set
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.ids import record_id, record_ids, record_ids_array
from thalweg_bytewax.registry import registry_client

AVRO_SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "twg.args",
    "fields": [{"name": "id", "type": "long"}],
}
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


def _avro_registry() -> AvroCodec:
    from confluent_kafka.schema_registry import Schema  # noqa: PLC0415

    url = f"mock://args-{uuid.uuid4()}"
    registry_client(url).register_schema("rows-value", Schema(json.dumps(AVRO_SCHEMA)))
    return AvroCodec(url)


CODECS: dict[str, Callable[[], Codec]] = {
    "avro-none": lambda: AvroCodec(schema=AVRO_SCHEMA, framing="none"),
    "avro-registry": _avro_registry,
    "protobuf": lambda: ProtobufCodec(
        descriptor_set=order_descriptor_set(), message_type=ORDER_MESSAGE_TYPE, framing="none"
    ),
    "json": lambda: JsonCodec(JSON_SCHEMA),
}


@pytest.fixture(scope="module", params=sorted(CODECS))
def codec(request: pytest.FixtureRequest) -> Codec:
    return CODECS[request.param]()


class _Opaque:
    """An object no entry point can take."""


scalars = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.just(_Opaque()),
    st.just(dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
wrong_arrays = st.sampled_from(
    [
        pa.array([1, 2]),
        pa.array([1.5]),
        pa.array([True, None]),
        pa.array([[b"a"]]),
        pa.array([{"a": 1}]),
        pa.array([dt.datetime(2024, 1, 1)]),
        pa.array([b"abcd"], pa.binary(4)),
        pa.chunked_array([pa.array([1, 2])]),
    ]
)
# Whole-batch arguments that are not a batch of payloads.
wrong_batches = st.one_of(
    st.none(),
    scalars,
    st.text(max_size=5),
    st.binary(max_size=5),
    st.just(bytearray(b"{}")),
    wrong_arrays,
    # A list with at least one element that is not bytes, str or None.
    st.lists(st.binary(max_size=4) | st.none(), max_size=3).flatmap(
        lambda good: scalars.map(lambda bad: [*good, bad])
    ),
)
wrong_values = st.one_of(scalars, st.lists(st.binary(max_size=3), max_size=2))
wrong_headers = st.one_of(
    scalars.filter(lambda v: not isinstance(v, dict)) | st.text(min_size=1, max_size=3),
    st.just(pa.array([1])),
    st.just([[("k", 1)]]),
    st.just([[("k",)]]),
    st.just([[(1, b"v")]]),
    st.just(["kv"]),
)


@given(payloads=wrong_batches)
def test_decode_batch_refuses_wrong_payloads(codec: Codec, payloads: Any) -> None:
    with pytest.raises(ConfigError, match="`payloads` expected"):
        codec.decode_batch(payloads)


@given(payload=wrong_values)
def test_decode_value_refuses_wrong_payloads(codec: Codec, payload: Any) -> None:
    with pytest.raises(ConfigError, match="`payload` expected"):
        codec.decode_value(payload)


@given(headers=wrong_headers)
def test_decode_batch_refuses_wrong_headers(codec: Codec, headers: Any) -> None:
    with pytest.raises(ConfigError, match="`headers` expected"):
        codec.decode_batch([b"\x00"], headers=headers)


def test_issue_examples() -> None:
    codec = JsonCodec(JSON_SCHEMA)
    for bad in (None, pa.array([1, 2])):
        with pytest.raises(ConfigError, match="json codec: `payloads` expected"):
            codec.decode_batch(bad)
    with pytest.raises(ConfigError, match="`partition` expected a 32-bit"):
        record_ids_array("c", "t", 2**31, pa.array([0]), pa.array([b""]))


@pytest.mark.parametrize(
    "payloads",
    [
        pa.array([b'{"id": 1}']),
        pa.array([b'{"id": 1}'], pa.large_binary()),
        pa.chunked_array([pa.array([b'{"id": 1}']), pa.array([b'{"id": 2}'])]),
        pa.array(['{"id": 1}']),
        pa.array([None, None]),
        [b'{"id": 1}', bytearray(b'{"id": 2}'), memoryview(b'{"id": 3}'), None],
        (),
    ],
    ids=["binary", "large_binary", "chunked", "string", "null", "list", "empty"],
)
def test_documented_payload_shapes_still_decode(payloads: Any) -> None:
    result = JsonCodec(JSON_SCHEMA).decode_batch(payloads)
    assert result.batch.num_rows + len(result.errors) == len(payloads)


def test_good_headers_still_pass() -> None:
    codec = _avro_registry()
    payload = encode_confluent(1, b"\x02")
    for headers in ([[("k", b"v")]], [None], [[{"key": "k", "value": None}]], None):
        assert codec.decode_batch([payload], headers=headers).batch.num_rows == 1
    assert codec.decode_value(payload, headers=[("k", b"v")]) == {"id": 1}


# -- record ids -------------------------------------------------------------------------

INT32 = 2**31
INT64 = 2**63
wrong_int = st.one_of(
    st.integers(max_value=-INT64 - 1),
    st.integers(min_value=INT64),
    st.floats(),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
    st.just(_Opaque()),
)
wrong_partition = st.one_of(
    st.integers(max_value=-INT32 - 1), st.integers(min_value=INT32), wrong_int
)
wrong_text = st.one_of(st.integers(), st.binary(max_size=3), st.just(_Opaque()))


@st.composite
def record_id_calls(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """One call with exactly one wrong argument: (which entry point, its arguments)."""
    args: list[Any] = ["cluster", "topic", 0, 0, b"v"]
    which = draw(st.sampled_from(["cluster", "topic", "partition", "offset", "value"]))
    slot = ["cluster", "topic", "partition", "offset", "value"].index(which)
    args[slot] = draw(
        {
            "cluster": wrong_text,
            "topic": wrong_text | st.none(),
            "partition": wrong_partition,
            "offset": wrong_int,
            "value": wrong_text.filter(lambda v: not isinstance(v, bytes)) | st.text(min_size=1),
        }[which]
    )
    return which, tuple(args)


@given(call=record_id_calls())
def test_record_id_refuses_wrong_arguments(call: tuple[str, tuple[Any, ...]]) -> None:
    which, (cluster, topic, partition, offset, value) = call
    with pytest.raises(ConfigError, match=f"`{which}"):
        record_id(cluster, topic, partition, offset, value)
    # record_ids checks an offset only when packing it fails (its loop stays tight), so a
    # bool offset there is taken as the int it is.
    if not (which == "offset" and isinstance(offset, bool)):
        with pytest.raises(ConfigError, match=f"`{which}"):
            record_ids(cluster, topic, partition, [0, offset], [b"", value])
    if which in ("cluster", "topic", "partition"):
        with pytest.raises(ConfigError, match=f"`{which}"):
            record_ids_array(cluster, topic, partition, pa.array([0]), pa.array([b""]))


@given(
    offsets=st.one_of(
        wrong_int.filter(lambda v: not isinstance(v, int | float) or isinstance(v, bool)),
        st.just(pa.array([1.5])),
        st.just(pa.array(["1"])),
        st.just(pa.array([0, None])),
        st.just(pa.array([2**63], pa.uint64())),
        st.just(pa.array([0, 1, 2])),
        st.just([0]),
    ),
)
def test_record_ids_array_refuses_wrong_offsets(offsets: Any) -> None:
    with pytest.raises(ConfigError, match="`offsets"):
        record_ids_array("c", "t", 0, offsets, pa.array([b"", None]))


@given(
    values=st.one_of(
        st.just(pa.array([1, 2])),
        st.just(pa.array([[b"a"], None])),
        st.just([b"", b""]),
        st.just(pa.array([b""])),
        st.none(),
    ),
)
def test_record_ids_array_refuses_wrong_values(values: Any) -> None:
    with pytest.raises(ConfigError, match="`values|`offsets"):
        record_ids_array("c", "t", 0, pa.array([0, 1]), values)
