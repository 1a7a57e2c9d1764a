"""``BytesEncoder`` passes the raw payload column through; framing helpers frame bodies."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from thalweg_bytewax.codecs import BytesEncoder, EncodeError, Encoder
from thalweg_bytewax.codecs._encode import frame_bodies, subject_name
from thalweg_bytewax.codecs.framing import peel
from thalweg_bytewax.errors import ConfigError


def test_bytes_encoder_passes_values_and_tombstones_through() -> None:
    enc = BytesEncoder()
    assert isinstance(enc, Encoder)
    batch = pa.record_batch({"_twg_source_value": pa.array([b"\x00ab", None, b""])})
    out = enc.encode_batch(batch, topic="t")
    assert out.values.to_pylist() == [b"\x00ab", None, b""]
    assert out.headers is None


def test_bytes_encoder_takes_strings_and_names_a_missing_or_wrong_column() -> None:
    enc = BytesEncoder("v")
    assert enc.encode_batch(pa.record_batch({"v": ["x"]}), topic="t").values.to_pylist() == [b"x"]
    with pytest.raises(EncodeError, match="expected column `v`") as info:
        enc.encode_batch(pa.record_batch({"w": [b"x"]}), topic="t")
    assert info.value.column == "v"
    with pytest.raises(EncodeError, match="column `v` expected binary or string; got `int64`"):
        enc.encode_batch(pa.record_batch({"v": [1]}), topic="t")
    with pytest.raises(ConfigError):
        BytesEncoder("")


def test_encode_error_pickles_with_its_fields() -> None:
    err = pickle.loads(pickle.dumps(EncodeError("avro encoder: bad", column="a", row=3)))
    assert (err.message, err.column, err.row) == ("avro encoder: bad", "a", 3)


def test_frame_bodies_payload_and_header_framing_peel_back() -> None:
    bodies = pa.array([b"body", None], pa.binary())
    framed = frame_bodies(bodies, schema_id=7, guid=None, schema_id_in="payload")
    ref = peel(framed.values[0].as_py())
    assert (ref.schema_id, framed.values[0].as_py()[ref.body_offset :]) == (7, b"body")
    assert framed.values[1].as_py() is None
    guid = "8a6f1f0e-8b0a-4c0b-9a4e-0f6a7c1d2e3f"
    framed = frame_bodies(
        bodies, schema_id=7, guid=guid, schema_id_in="header", message_indexes=[1, 0]
    )
    assert framed.values.to_pylist() == [b"body", None]
    assert framed.headers is not None
    ref = peel(b"body", framed.headers[0], protobuf=True)
    assert (str(ref.guid), ref.message_indexes, ref.body_offset) == (guid, (1, 0), 0)
    with pytest.raises(EncodeError, match="schema GUID"):
        frame_bodies(bodies, schema_id=7, guid=None, schema_id_in="header")


def test_subject_names_follow_confluent_strategies() -> None:
    assert subject_name("topic", "orders", "shop.Order") == "orders-value"
    assert subject_name("topic", "orders", "shop.Order", is_key=True) == "orders-key"
    assert subject_name("record", "orders", "shop.Order") == "shop.Order"
    assert subject_name("topic_record", "orders", "shop.Order") == "orders-shop.Order"
