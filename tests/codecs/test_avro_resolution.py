"""Writer-to-output resolution edge cases: promotion, framing, unions, fast-path checks."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.avro import AvroCodec, AvroEngine
from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.registry import DirectorySchemaSource


def _dir(tmp_path: Path, schemas: dict[int, dict[str, Any]]) -> Path:
    for key, schema in schemas.items():
        (tmp_path / f"{key}.avsc").write_text(json.dumps(schema))
    return tmp_path


def _body(schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def _framed(sid: int, schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    return encode_confluent(sid, _body(schema, rec))


def _record(*fields: tuple[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_promotion_without_reader_converts_numbers_and_rejects_bad_utf8(
    tmp_path: Path, engine: AvroEngine
) -> None:
    old = _record(("a", "int"), ("b", "bytes"), ("c", "long"))
    new = _record(("a", "float"), ("b", "string"), ("c", "double"))
    codec = AvroCodec(_dir(tmp_path, {1: old, 2: new}), engine=engine)
    big = 2**53 + 1
    result = codec.decode_batch(
        [
            _framed(2, new, {"a": 1.5, "b": "x", "c": 0.5}),
            _framed(1, old, {"a": 2**24 + 1, "b": b"ok", "c": big}),
            _framed(1, old, {"a": 2, "b": b"\xff\xfe", "c": 1}),
            _framed(1, old, {"a": 3, "b": b"fine", "c": 2}),
        ]
    )
    assert [(e.index, e.kind) for e in result.errors] == [(2, FailureKind.MALFORMED)]
    assert "`b`" in result.errors[0].message and "UTF-8" in result.errors[0].message
    assert result.batch.to_pylist() == [
        {"a": 1.5, "b": "x", "c": 0.5},
        {"a": float(2**24), "b": "ok", "c": float(big)},  # nearest float32 / float64
        {"a": 3.0, "b": "fine", "c": 2.0},
    ]


def _guid_codec(
    tmp_path: Path, schemas: dict[str, dict[str, Any]], **kw: Any
) -> tuple[AvroCodec, dict[str, uuid.UUID]]:
    for name, schema in schemas.items():
        (tmp_path / f"{name}.avsc").write_text(json.dumps(schema))
    guids = {name: uuid.uuid4() for name in schemas}
    source = DirectorySchemaSource(tmp_path, ids={str(g): f"{n}.avsc" for n, g in guids.items()})
    return AvroCodec(source, **kw), guids


def _hdr(guid: uuid.UUID) -> list[tuple[str, bytes]]:
    return [("__value_schema_id", b"\x01" + guid.bytes)]


V1 = _record(("id", "long"))
V2 = _record(("id", "long"), ("email", ["null", "string"]))


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
@pytest.mark.parametrize("first", ["v1", "v2"])
def test_guid_output_schema_does_not_depend_on_which_writer_shows_first(
    tmp_path: Path, engine: AvroEngine, first: str
) -> None:
    codec, g = _guid_codec(tmp_path, {"v1": V1, "v2": V2}, engine=engine)
    body = _body(V1, {"id": 0}) if first == "v1" else _body(V2, {"id": 0, "email": "a@x"})
    assert codec.decode_batch([body], headers=[_hdr(g[first])]).errors == []
    # A lagging producer still on v1 next to v2, in both orders, then v2 alone.
    result = codec.decode_batch(
        [_body(V1, {"id": 2}), _body(V2, {"id": 3, "email": "b@x"})],
        headers=[_hdr(g["v1"]), _hdr(g["v2"])],
    )
    assert result.errors == []
    assert result.batch.to_pylist() == [{"id": 2, "email": None}, {"id": 3, "email": "b@x"}]
    result = codec.decode_batch([_body(V2, {"id": 4, "email": "c@x"})], headers=[_hdr(g["v2"])])
    assert result.errors == []
    assert result.batch.to_pylist() == [{"id": 4, "email": "c@x"}]
    assert codec.arrow_schema.names == ["id", "email"]


def test_guid_writers_that_each_lack_a_field_never_drop_one(tmp_path: Path) -> None:
    va = _record(("id", "long"), ("a", "string"))
    vb = _record(("id", "long"), ("b", "string"))
    codec, g = _guid_codec(tmp_path, {"a": va, "b": vb})
    result = codec.decode_batch(
        [_body(va, {"id": 1, "a": "x"}), _body(vb, {"id": 2, "b": "y"})],
        headers=[_hdr(g["a"]), _hdr(g["b"])],
    )
    assert result.batch.to_pylist() == [{"id": 1, "a": "x"}]
    assert [(e.index, e.kind) for e in result.errors] == [(1, FailureKind.SCHEMA_MISMATCH)]
    assert "reader_schema" in result.errors[0].message


@pytest.mark.parametrize(
    "branches",
    [
        ["null", "float", "double"],
        ["null", "int", "long"],
        [
            "null",
            {"type": "long", "logicalType": "timestamp-millis"},
            {"type": "long", "logicalType": "timestamp-micros"},
        ],
        ["null", "string", {"type": "enum", "name": "E", "symbols": ["A"]}],
        ["null", "string", {"type": "string", "logicalType": "uuid"}],
    ],
    ids=["float-double", "int-long", "ts-millis-micros", "string-enum", "string-uuid"],
)
@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_union_whose_branches_decode_alike_is_refused_naming_the_field(
    tmp_path: Path, branches: list[Any], engine: AvroEngine
) -> None:
    schema = _record(("id", "long"), ("v", branches))
    codec = AvroCodec(_dir(tmp_path, {1: schema}), engine=engine)
    payload = encode_confluent(1, b"\x02\x00")  # id 1, v null
    result = codec.decode_batch([payload])
    assert result.batch.num_rows == 0
    assert [e.kind for e in result.errors] == [FailureKind.SCHEMA_MISMATCH]
    assert "field `v`" in result.errors[0].message
    with pytest.raises(SchemaError, match="field `v`"):
        AvroCodec(framing="none", schema=schema)


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_union_with_distinct_branches_keeps_the_written_branch(tmp_path: Path, engine: AvroEngine) -> None:
    e = {"type": "enum", "name": "E", "symbols": ["A"]}
    f = {"type": "fixed", "name": "F", "size": 2}
    schema = _record(("v", ["null", "string", e, f, "double"]))
    codec = AvroCodec(_dir(tmp_path, {1: schema}), engine=engine)
    values: list[Any] = ["A", ("E", "A"), ("F", b"ab"), 0.1, None]
    result = codec.decode_batch([_framed(1, schema, {"v": v}) for v in values])
    assert result.errors == []
    column = result.batch.column("v")
    assert column.type_codes.to_pylist() == [1, 2, 3, 4, 0]
    assert column.to_pylist() == ["A", "A", b"ab", 0.1, None]


def _zz(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes([*out, z])


TAGGED = _record(
    ("id", "long"),
    ("opt", ["null", "long"]),
    ("s", "string"),
    ("flag", "boolean"),
    ("xs", {"type": "array", "items": ["long", "null"]}),
    ("addr", ["null", _record(("ok", "boolean"), name="A")]),
)


def _tagged(i: int) -> dict[str, Any]:
    return {"id": i, "opt": i, "s": "ok", "flag": True, "xs": [1, None], "addr": {"ok": False}}


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
@pytest.mark.parametrize(
    ("pos", "byte"),
    [(1, 0x04), (6, 0x02), (8, 0x04), (10, 0x04), (12, 0x04), (13, 0x02)],
    ids=[
        "branch-top",
        "bool-top",
        "branch-in-array",
        "branch-in-array-2",
        "branch-rec",
        "bool-rec",
    ],
)
def test_non_canonical_branch_or_boolean_byte_is_malformed_on_both_paths(
    tmp_path: Path, engine: AvroEngine, pos: int, byte: int
) -> None:
    base = _body(TAGGED, _tagged(7))
    # id(1) opt-branch(1) opt(1) s-len(1) "ok"(2) flag(1) xs-count(1) branch(1) 1(1)
    # branch(1) end(1) addr-branch(1) ok(1)
    assert len(base) == 14 and base[6] == 1 and base[13] == 0
    bad = bytearray(base)
    bad[pos] = byte
    codec = AvroCodec(_dir(tmp_path, {1: TAGGED}), engine=engine)
    good = [_framed(1, TAGGED, _tagged(i)) for i in range(3)]
    result = codec.decode_batch([good[0], encode_confluent(1, bytes(bad)), *good[1:]])
    assert [(e.index, e.kind) for e in result.errors] == [(1, FailureKind.MALFORMED)]
    assert result.batch.to_pylist() == [_tagged(i) for i in range(3)]


@pytest.mark.parametrize("engine", ["polars", "fastavro"])
def test_valid_non_canonical_layout_is_not_flagged(tmp_path: Path, engine: AvroEngine) -> None:
    schema = _record(("xs", {"type": "array", "items": "boolean"}), ("flag", "boolean"))
    # Two array blocks (valid Avro, another writer's choice), then the boolean.
    body = _zz(1) + b"\x01" + _zz(1) + b"\x00" + _zz(0) + b"\x01"
    codec = AvroCodec(_dir(tmp_path, {1: schema}), engine=engine)
    result = codec.decode_batch([encode_confluent(1, body)] * 2)
    assert result.errors == []
    assert result.batch.to_pylist() == [{"xs": [True, False], "flag": True}] * 2


NESTED = _record(
    ("i", "int"),
    ("inner", _record(("v", "long"), name="In")),
    ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
)


def _reader(name: str = "R", inner: str = "In", enum: str = "E", **extra: Any) -> dict[str, Any]:
    inner_t: dict[str, Any] = {
        "type": "record",
        "name": inner,
        "fields": [{"name": "v", "type": "long"}],
    }
    enum_t: dict[str, Any] = {"type": "enum", "name": enum, "symbols": ["A", "B"]}
    for key, aliases in extra.items():
        target = {"aliases": inner_t, "enum_aliases": enum_t}.get(key)
        if target is not None:
            target["aliases"] = aliases
    doc = _record(("i", "int"), ("inner", inner_t), ("e", enum_t), name=name)
    if "top_aliases" in extra:
        doc["aliases"] = extra["top_aliases"]
    return doc


@pytest.mark.parametrize(
    ("reader", "renamed"),
    [
        (_reader(), False),
        (_reader(name="Other"), True),
        (_reader(inner="Other"), True),
        (_reader(enum="Other"), True),
        (_reader(name="Other", top_aliases=["R"]), None),
        (_reader(inner="Other", aliases=["In"]), None),
        (_reader(enum="Other", enum_aliases=["E"]), None),
    ],
    ids=["same", "top", "nested", "enum", "top-alias", "nested-alias", "enum-alias"],
)
def test_reader_named_types_resolve_alike_on_both_paths(
    tmp_path: Path, reader: dict[str, Any], renamed: bool | None
) -> None:
    d = _dir(tmp_path, {1: NESTED})
    payloads = [_framed(1, NESTED, {"i": i, "inner": {"v": i}, "e": "B"}) for i in range(3)]
    fast = AvroCodec(d, reader_schema=reader, engine="polars").decode_batch(payloads)
    exact = AvroCodec(d, reader_schema=reader, engine="fastavro").decode_batch(payloads)
    assert fast.batch.to_pylist() == exact.batch.to_pylist()
    assert [(e.index, e.kind) for e in fast.errors] == [(e.index, e.kind) for e in exact.errors]
    if renamed is not None:
        assert bool(fast.errors) == renamed
        assert all(e.kind is FailureKind.SCHEMA_MISMATCH for e in fast.errors)


@pytest.mark.parametrize("rows", [1, 3])
def test_headers_of_the_wrong_length_are_a_config_error(tmp_path: Path, rows: int) -> None:
    codec, g = _guid_codec(tmp_path, {"v1": V1})
    payloads = [_body(V1, {"id": 1}), _body(V1, {"id": 2})]
    with pytest.raises(ConfigError, match=f"expected 2 header rows .*got {rows}"):
        codec.decode_batch(payloads, headers=[_hdr(g["v1"])] * rows)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    column = [[{"key": k, "value": v} for k, v in _hdr(g["v1"])]] * 2
    result = codec.decode_batch(payloads, headers=pa.array(column, header_type))
    assert result.errors == []
    assert result.batch.to_pylist() == [{"id": 1}, {"id": 2}]
