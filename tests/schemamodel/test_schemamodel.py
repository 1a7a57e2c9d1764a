"""The schema model: Avro and JSON Schema to ODCS v3 and back to the codec's Arrow schema.

The property: a random Avro record schema, converted to ODCS, loads back with
`parse_contract` and yields exactly the Arrow schema the Avro codec decodes to, for
every column whose conversion states no loss; each lossy column (unions, fixed,
time-millis, ...) is named in the contract's limitations and on the property.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures.odcs_schema import odcs_schema_errors
from thalweg_bytewax._deps import require
from thalweg_bytewax.codecs import AvroCodec, JsonCodec
from thalweg_bytewax.contracts import load_contract, parse_contract
from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.schemamodel import (
    LOSS_PROPERTY,
    from_avro,
    from_json_schema,
    model_from_file,
    to_odcs,
    to_odcs_yaml,
)

yaml = require("yaml", extra="contracts")

EXACT = [
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "string",
    "bytes",
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "long", "logicalType": "local-timestamp-millis"},
    {"type": "long", "logicalType": "local-timestamp-micros"},
    {"type": "string", "logicalType": "uuid"},
    {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
]
LOSSY = [
    {"type": "int", "logicalType": "time-millis"},
    ["int", "string"],
    ["null", "long", "string"],
]
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def avro_types(draw, depth: int = 0):
    counter = draw(st.integers(0, 10**6))
    choices = [st.sampled_from(EXACT + LOSSY)]
    choices.append(
        st.builds(
            lambda syms: {"type": "enum", "name": f"E{counter}", "symbols": syms},
            st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,4}", fullmatch=True), min_size=1,
                     max_size=4, unique=True),
        )
    )
    choices.append(st.just({"type": "fixed", "name": f"F{counter}", "size": 4}))
    if depth < 2:
        inner = avro_types(depth + 1)
        choices.append(st.builds(lambda t: {"type": "array", "items": t}, inner))
        choices.append(st.builds(lambda t: {"type": "map", "values": t}, inner))
        choices.append(
            st.builds(
                lambda fs: {"type": "record", "name": f"R{counter}", "fields": fs},
                avro_fields(depth + 1),
            )
        )
    t = draw(st.one_of(*choices))
    if isinstance(t, dict | str) and draw(st.booleans()):
        return ["null", t]
    return t


@st.composite
def avro_fields(draw, depth: int = 0):
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    fields = []
    for n in names:
        f = {"name": n, "type": draw(avro_types(depth))}
        if draw(st.booleans()):
            f["doc"] = f"the {n}"
        fields.append(f)
    return fields


def lossy_columns(doc: dict) -> set[str]:
    lines = doc["description"].get("limitations", "").splitlines()[1:]
    return {line.split(": ", 2)[1].split(".")[0].split("[")[0].split("{")[0] for line in lines}


@given(avro_fields())
def test_avro_to_odcs_loads_back_to_the_codec_schema(fields) -> None:
    schema = {"type": "record", "name": "com.example.Rec", "fields": fields}
    try:
        expected = AvroCodec(framing="none", schema=schema).arrow_schema
    except Exception:  # a union the codec refuses (two branches of one kind)
        return
    doc = to_odcs([from_avro(schema)], contract_id="rec")
    assert odcs_schema_errors(doc) == []
    got = parse_contract(yaml.safe_dump(doc)).arrow_schema()
    lossy = lossy_columns(doc)
    assert got.names == expected.names
    for name in expected.names:
        if name in lossy:
            continue
        assert got.field(name).type == expected.field(name).type, name
        assert got.field(name).nullable == expected.field(name).nullable, name
    for i, f in enumerate(fields):
        t = f["type"] if not isinstance(f["type"], list) else f["type"]
        text = json.dumps(t)
        if "time-millis" in text or "fixed" in text or (
            isinstance(t, list) and len([b for b in t if b != "null"]) > 1
        ):
            assert f["name"] in lossy, (f, doc["description"])
        prop = doc["schema"][0]["properties"][i]
        assert prop.get("description") == f.get("doc")


def test_losses_are_stated_on_the_property_and_in_the_limitations() -> None:
    schema = {
        "type": "record",
        "name": "Rec",
        "fields": [
            {"name": "u", "type": ["int", "string"]},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 16}},
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40}},
            {"name": "n", "type": ["null", "int"], "default": None},
        ],
    }
    doc = to_odcs([from_avro(schema)], contract_id="rec")
    props = {p["name"]: p for p in doc["schema"][0]["properties"]}
    for name in ("u", "f", "d"):
        assert props[name]["customProperties"][0]["property"] == LOSS_PROPERTY
    limits = doc["description"]["limitations"]
    assert "Rec: u: a union of several types" in limits
    assert "Rec: f: fixed(16)" in limits
    assert "wider than 38 digits" in limits
    assert "Rec: n: the default value None is not kept" in limits
    assert props["n"]["customProperties"] == [
        {"property": LOSS_PROPERTY, "value": "the default value None is not kept"}
    ]
    assert odcs_schema_errors(doc) == []
    parse_contract(yaml.safe_dump(doc))  # still loads


def test_every_source_loss_is_stated_on_the_property_it_concerns() -> None:
    nested = {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int", "default": 3}]}
    schema = {"type": "record", "name": "Rec", "fields": [{"name": "r", "type": nested}]}
    doc = to_odcs([from_avro(schema)], contract_id="rec")
    (x,) = doc["schema"][0]["properties"][0]["properties"]
    assert x["customProperties"] == [
        {"property": LOSS_PROPERTY, "value": "the default value 3 is not kept"}
    ]
    doc = to_odcs([from_json_schema(JSON_SCHEMA)], contract_id="events")
    props = {p["name"]: p for p in doc["schema"][0]["properties"]}
    assert props["score"]["customProperties"] == [
        {"property": LOSS_PROPERTY, "value": "minimum not kept"}
    ]
    assert odcs_schema_errors(doc) == []


def test_an_enum_without_symbols_states_its_loss_and_stays_valid() -> None:
    doc = to_odcs([from_json_schema(
        {"title": "T", "type": "object", "properties": {"e": {"enum": [None, "a", "a"]},
                                                        "z": {"type": "string", "enum": []}}}
    )], contract_id="t")
    e, z = doc["schema"][0]["properties"]
    assert e["enum"] == [{"value": "a"}]
    assert "enum" not in z and z["customProperties"][0]["property"] == LOSS_PROPERTY
    assert odcs_schema_errors(doc) == []


def test_enums_become_allowed_values_and_nested_records_objects(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "com.example.Order",
        "doc": "An order",
        "fields": [
            {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "PAID"]}},
            {
                "name": "customer",
                "type": {
                    "type": "record",
                    "name": "Customer",
                    "fields": [{"name": "email", "type": ["null", "string"], "doc": "mail"}],
                },
            },
            {"name": "again", "type": ["null", "Customer"]},
        ],
    }
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(schema))
    out = tmp_path / "order.odcs.yaml"
    out.write_text(to_odcs_yaml([model_from_file(path)], contract_id="orders"))
    spec = load_contract(out)
    obj = spec.object("Order")
    assert obj.description == "An order"
    assert any(r.kind == "allowed_values" and r.values == ("NEW", "PAID") for r in obj.rules)
    want = AvroCodec(framing="none", schema=schema).arrow_schema
    assert spec.arrow_schema().equals(want)
    nested = yaml.safe_load(out.read_text())["schema"][0]["properties"][1]["properties"][0]
    assert nested == {
        "name": "email",
        "logicalType": "string",
        "physicalType": "string",
        "required": False,
        "description": "mail",
    }


JSON_SCHEMA = {
    "title": "Event",
    "type": "object",
    "description": "An event",
    "properties": {
        "id": {"type": "integer", "description": "the id"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": ["string", "null"], "format": "date"},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "score": {"type": "number", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "who": {"$ref": "#/$defs/who"},
        "maybe": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
    },
    "required": ["id", "at", "kind", "who"],
    "$defs": {
        "who": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
        }
    },
}


def test_json_schema_to_odcs_loads_back_to_the_json_codec_schema() -> None:
    doc = to_odcs([from_json_schema(JSON_SCHEMA)], contract_id="events")
    got = parse_contract(yaml.safe_dump(doc)).arrow_schema()
    want = JsonCodec(JSON_SCHEMA).arrow_schema
    assert got.equals(want), (got, want)
    assert odcs_schema_errors(doc) == []
    assert got.field("id").metadata == {b"description": b"the id"}
    assert "Event: score: minimum not kept" in doc["description"]["limitations"]


def test_the_cli_writes_a_contract_that_loads(tmp_path: Path, capsys) -> None:
    from thalweg_bytewax.cli import main

    src = tmp_path / "event.json"
    src.write_text(json.dumps(JSON_SCHEMA))
    out = tmp_path / "event.odcs.yaml"
    assert main(["schema", "to-odcs", str(src), "--out", str(out)]) == 0
    assert load_contract(out).arrow_schema().equals(JsonCodec(JSON_SCHEMA).arrow_schema)
    assert main(["schema", "to-odcs", str(src)]) == 0
    assert capsys.readouterr().out.count("apiVersion: v3") == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["schema", "to-odcs", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["list", "map"])
def test_array_items_and_map_values_keep_their_nullability(kind: str) -> None:
    inner = {"type": "array", "items": "long"} if kind == "list" else {"type": "map", "values": "long"}
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": inner}]}
    got = parse_contract(to_odcs_yaml([from_avro(schema)], contract_id="r")).arrow_schema()
    t = got.field("x").type
    child = t.value_field if kind == "list" else t.item_field
    assert child.nullable is False
    assert t == AvroCodec(framing="none", schema=schema).arrow_schema.field("x").type
    assert isinstance(t, pa.ListType | pa.MapType)


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("other.json#/defs/a", "expected a local `$ref`"),
        ("#/defs/missing", "does not resolve"),
        ("#/defs/loop", "`$ref` cycle"),
    ],
)
def test_json_schema_references_are_refused_as_the_json_codec_refuses_them(
    ref: str, says: str
) -> None:
    doc = {
        "type": "object",
        "properties": {"a": {"$ref": ref}},
        "defs": {"loop": {"$ref": "#/defs/loop"}},
    }
    with pytest.raises(SchemaError) as by_model:
        from_json_schema(doc)
    with pytest.raises(SchemaError) as by_codec:
        JsonCodec(doc)
    assert says in str(by_model.value)
    assert str(by_model.value) == str(by_codec.value)
