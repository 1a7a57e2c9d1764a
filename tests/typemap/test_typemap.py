"""The one type map: every codec type maps to both targets, widening is lossless."""

from __future__ import annotations

import decimal
import itertools
import re

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.typemap import (
    MAX_IDENTIFIER_BYTES,
    arrow_type_of_iceberg,
    arrow_type_of_postgres,
    can_widen_to,
    canonical_type,
    iceberg_schema,
    iceberg_type,
    iceberg_type_name,
    postgres_type,
    same_type,
    validate_identifier,
)

# -- strategies: the Arrow types the codecs and file sources produce -------------------

_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_SCALARS = st.one_of(
    st.sampled_from(
        [
            pa.bool_(),
            pa.int8(), pa.int16(), pa.int32(), pa.int64(),
            pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
            pa.float16(), pa.float32(), pa.float64(),
            pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
            pa.uuid(), pa.date32(), pa.time32("ms"), pa.time64("us"),
            pa.duration("s"), pa.duration("ms"), pa.duration("us"),
            pa.dictionary(pa.int32(), pa.string()),
        ]
    ),
    st.integers(1, 64).map(pa.binary),
    st.builds(
        pa.timestamp, st.sampled_from(["s", "ms", "us"]), st.sampled_from([None, "UTC", "Europe/Paris"])
    ),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s))),
)


def _nested(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    struct = st.lists(st.tuples(_NAMES, children), min_size=1, max_size=3, unique_by=lambda x: x[0])
    return st.one_of(
        struct.map(lambda fs: pa.struct([pa.field(n, t) for n, t in fs])),
        children.map(pa.list_),
        children.map(pa.large_list),
        children.map(lambda t: pa.map_(pa.string(), t)),
    )


ARROW_TYPES = st.recursive(_SCALARS, _nested, max_leaves=6)

_PG_WORD = re.compile(
    r"^(boolean|smallint|integer|bigint|real|double precision|text|bytea|date|time|"
    r"timestamp|timestamptz|interval|uuid|jsonb|numeric\(\d+,\d+\))(\[\])?$"
)


# -- every type maps --------------------------------------------------------------------


@given(ARROW_TYPES)
def test_every_codec_type_maps_to_a_postgres_ddl_type(t):
    ddl = postgres_type(t)
    assert _PG_WORD.match(ddl), ddl
    # Described back, the column is the canonical type, which maps to the same DDL.
    assert arrow_type_of_postgres(ddl) == canonical_type(t, "postgres")
    assert postgres_type(canonical_type(t, "postgres")) == ddl


@given(ARROW_TYPES)
def test_every_codec_type_maps_to_an_iceberg_type(t):
    ice = iceberg_type(t)
    assert str(ice).replace(" ", "") or True
    back = arrow_type_of_iceberg(ice)
    assert same_type(back, canonical_type(t, "iceberg"))
    assert iceberg_type_name(back) == iceberg_type_name(t)


AVRO_ALL = {
    "type": "record",
    "name": "All",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "by", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F8", "size": 8}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "opt", "type": ["null", "long"]},
        {"name": "arr", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": "double"}},
        {
            "name": "rec",
            "type": {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]},
        },
        {"name": "recs", "type": {"type": "array", "items": "R"}},
    ],
}


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_the_avro_and_json_codec_schemas_map_whole(target):
    avro = AvroCodec(framing="none", schema=AVRO_ALL).arrow_schema
    json = JsonCodec(
        {
            "type": "object",
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "day": {"type": "string", "format": "date"},
                "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
            },
        }
    ).arrow_schema
    for f in [*avro, *json]:
        canonical_type(f.type, target)  # raises when a codec type has no home
    pg = {f.name: postgres_type(f.type) for f in avro}
    assert pg["dec"] == "numeric(12,2)"
    assert pg["tsm"] == "timestamptz" and pg["ltm"] == "timestamp"
    assert pg["arr"] == "bigint[]" and pg["m"] == pg["rec"] == pg["recs"] == "jsonb"
    assert pg["fx"] == "bytea" and pg["u"] == "text"


def test_choices_documented_in_tables_md():
    assert postgres_type(pa.uint64()) == "numeric(20,0)"
    assert iceberg_type_name(pa.uint64()) == "decimal(20, 0)"
    assert postgres_type(pa.uint32()) == "bigint"
    assert iceberg_type_name(pa.uint32()) == "long"
    assert postgres_type(pa.int8()) == "smallint"
    assert iceberg_type_name(pa.int8()) == "int"
    assert iceberg_type_name(pa.binary(16)) == "fixed[16]"
    assert postgres_type(pa.binary(16)) == "bytea"
    assert postgres_type(pa.uuid()) == iceberg_type_name(pa.uuid()) == "uuid"
    assert postgres_type(pa.large_string()) == "text"
    assert iceberg_type_name(pa.large_string()) == "string"
    assert postgres_type(pa.timestamp("ms", tz="UTC")) == "timestamptz"
    assert postgres_type(pa.timestamp("s")) == "timestamp"
    assert iceberg_type_name(pa.timestamp("ms", tz="Europe/Paris")) == "timestamptz"
    assert postgres_type(pa.duration("us")) == "interval"
    assert iceberg_type_name(pa.duration("ms")) == "long"
    assert postgres_type(pa.list_(pa.list_(pa.int32()))) == "jsonb"
    assert postgres_type(pa.list_(pa.timestamp("us", "UTC"))) == "timestamptz[]"
    assert postgres_type(pa.decimal256(60, 10)) == "numeric(60,10)"


@pytest.mark.parametrize("t", [pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"), pa.time64("ns"), pa.duration("ns")])
def test_nanoseconds_are_refused_unless_truncation_is_opted_into(t):
    for target in ("postgres", "iceberg"):
        with pytest.raises(SchemaError, match=r"truncate.*"):
            canonical_type(t, target)
        canonical_type(t, target, conversion="truncate")
    assert postgres_type(pa.timestamp("ns", "UTC"), conversion="truncate") == "timestamptz"


def test_what_iceberg_cannot_hold_is_refused_with_the_remedy():
    union = pa.dense_union([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    assert postgres_type(union) == "jsonb"
    with pytest.raises(SchemaError, match=r"union.*to_json"):
        iceberg_type(union)
    with pytest.raises(SchemaError, match="38"):
        iceberg_type(pa.decimal256(50, 2))
    for target in ("postgres", "iceberg"):
        with pytest.raises(SchemaError, match="all-null"):
            canonical_type(pa.null(), target)


def test_iceberg_schema_names_the_column_it_cannot_map():
    schema = iceberg_schema(pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.struct([("x", pa.int32())]))]))
    assert [f.field_id for f in schema.fields] == [1, 2]
    assert schema.find_field("id").required and not schema.find_field("s").required
    with pytest.raises(SchemaError, match="column `ts`"):
        iceberg_schema(pa.schema([("ts", pa.timestamp("ns"))]))


@pytest.mark.parametrize(
    ("text", "arrow"),
    [
        ("int8", pa.int64()),
        ("character varying(20)", pa.string()),
        ("timestamp with time zone", pa.timestamp("us", "UTC")),
        ("timestamp(6) without time zone", pa.timestamp("us")),
        ("NUMERIC(10, 2)", pa.decimal128(10, 2)),
        ("numeric(50,3)", pa.decimal256(50, 3)),
        ("json", pa.json_()),
        ("text[]", pa.list_(pa.string())),
    ],
)
def test_postgres_aliases_describe_back(text, arrow):
    assert arrow_type_of_postgres(text) == arrow


@pytest.mark.parametrize("text", ["numeric", "timestamp(3)", "point", "my_domain", "numeric(2000,1)"])
def test_postgres_types_outside_the_vocabulary_are_refused(text):
    with pytest.raises(SchemaError, match=re.escape(repr(text))):
        arrow_type_of_postgres(text)


# -- widening -----------------------------------------------------------------------------

_WIDEN_DOMAIN = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint16(), pa.uint32(), pa.uint64(),
    pa.float32(), pa.float64(),
    pa.decimal128(5, 0), pa.decimal128(10, 0), pa.decimal128(10, 2), pa.decimal128(12, 2),
    pa.decimal128(12, 4), pa.decimal128(19, 0), pa.decimal128(20, 0), pa.decimal128(38, 2),
    pa.string(), pa.timestamp("ms", "UTC"), pa.timestamp("us"), pa.date32(),
    pa.list_(pa.int16()), pa.list_(pa.int64()), pa.list_(pa.float64()),
]


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
@given(ARROW_TYPES)
def test_widening_is_reflexive(target, t):
    if target == "iceberg" and not _iceberg_holds(t):
        return
    assert can_widen_to(t, t, target=target)


def _iceberg_holds(t):
    try:
        canonical_type(t, "iceberg")
    except SchemaError:
        return False
    return True


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_widening_is_transitive(target):
    for a, b, c in itertools.product(_WIDEN_DOMAIN, repeat=3):
        if can_widen_to(a, b, target=target) and can_widen_to(b, c, target=target):
            assert can_widen_to(a, c, target=target), (a, b, c)


def _extremes(t: pa.DataType) -> pa.Array:
    c = canonical_type(t, "postgres")
    if pa.types.is_list(c):
        return pa.array([list(_extremes(c.value_type).to_pylist()), None, []], c)
    if pa.types.is_integer(c):
        bits = c.bit_width
        return pa.array([-(2 ** (bits - 1)), 2 ** (bits - 1) - 1, 0, None, 7], c)
    if pa.types.is_floating(c):
        return pa.array([3.4e38 if c == pa.float32() else 1.7e308, -1.5, 1e-30, None], c)
    if pa.types.is_decimal(c):
        text = "9" * (c.precision - c.scale) + ("." + "9" * c.scale if c.scale else "")
        # Built from text: unary minus would round to the context's 28 digits.
        return pa.array([decimal.Decimal(text), decimal.Decimal("-" + text), decimal.Decimal(0), None], c)
    return pa.array([None], c)


@pytest.mark.parametrize("target", ["postgres", "iceberg"])
def test_widening_never_loses_a_value(target):
    pairs = 0
    for a, b in itertools.product(_WIDEN_DOMAIN, repeat=2):
        if not can_widen_to(a, b, target=target):
            continue
        pairs += 1
        values = _extremes(a).cast(canonical_type(a, target))
        wide = values.cast(canonical_type(b, target))
        assert wide.cast(values.type).equals(values), (a, b)
    assert pairs > len(_WIDEN_DOMAIN)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(0, 9))
def test_int_to_double_and_decimal_round_trip(v, extra_scale):
    arr = pa.array([v], pa.int32())
    assert arr.cast(pa.float64()).cast(pa.int32()).equals(arr)
    dec = pa.decimal128(10 + extra_scale, extra_scale)
    assert can_widen_to(pa.int32(), dec)
    assert arr.cast(dec).cast(pa.int32()).equals(arr)


@pytest.mark.parametrize(
    ("old", "new", "target"),
    [
        (pa.int64(), pa.float64(), "postgres"),  # 2**53 + 1 is not a double
        (pa.int32(), pa.float32(), "postgres"),
        (pa.int64(), pa.int32(), "postgres"),
        (pa.decimal128(12, 2), pa.decimal128(12, 3), "postgres"),  # loses an integer digit
        (pa.timestamp("us", "UTC"), pa.timestamp("us"), "postgres"),
        (pa.timestamp("us"), pa.timestamp("us", "UTC"), "postgres"),
        (pa.struct([("a", pa.int32())]), pa.string(), "postgres"),
        (pa.int32(), pa.string(), "postgres"),
        (pa.int16(), pa.float64(), "iceberg"),  # Iceberg allows int -> long only
        (pa.decimal128(10, 2), pa.decimal128(12, 3), "iceberg"),  # scale is fixed
        (pa.list_(pa.int32()), pa.list_(pa.int64()), "iceberg"),
        (pa.timestamp("ns"), pa.timestamp("us"), "postgres"),
    ],
)
def test_lossy_or_unsupported_changes_are_not_widenings(old, new, target):
    assert not can_widen_to(old, new, target=target)


@pytest.mark.parametrize(
    ("old", "new", "target"),
    [
        (pa.int32(), pa.int64(), "iceberg"),
        (pa.float32(), pa.float64(), "iceberg"),
        (pa.decimal128(10, 2), pa.decimal128(12, 2), "iceberg"),
        (pa.int16(), pa.float32(), "postgres"),
        (pa.int64(), pa.decimal128(19, 0), "postgres"),
        (pa.decimal128(10, 2), pa.decimal128(12, 4), "postgres"),
        (pa.list_(pa.int32()), pa.list_(pa.int64()), "postgres"),
        (pa.uint32(), pa.int64(), "iceberg"),  # the same column type
    ],
)
def test_lossless_widenings(old, new, target):
    assert can_widen_to(old, new, target=target)


# -- identifiers --------------------------------------------------------------------------

HOSTILE = ['"; DROP TABLE orders; --', "Orders", "1st", "a-b", "a b", "ordér"]


@pytest.mark.parametrize("name", HOSTILE)
def test_strict_identifiers_refuse_what_would_need_quoting(name):
    with pytest.raises(ConfigError, match=r"identifiers: column name .* expected lowercase"):
        validate_identifier(name)


@pytest.mark.parametrize("name", HOSTILE)
def test_relaxed_identifiers_accept_any_text_to_be_quoted(name):
    assert validate_identifier(name, mode="relaxed") == name


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
@pytest.mark.parametrize("name", ["", "a\x00b", "a" * (MAX_IDENTIFIER_BYTES + 1), "é" * 32, "\ud800", 7])
def test_identifiers_refused_in_every_mode(mode, name):
    with pytest.raises(ConfigError, match="identifiers:"):
        validate_identifier(name, mode=mode, what="table")


def test_a_long_name_is_refused_with_the_reason_of_its_target():
    name = "a" * (MAX_IDENTIFIER_BYTES + 1)
    with pytest.raises(ConfigError, match="PostgreSQL would truncate it silently"):
        validate_identifier(name, target="postgres")
    for target in ("iceberg", None):
        with pytest.raises(ConfigError, match="shorten it") as info:
            validate_identifier(name, target=target)
        assert "PostgreSQL" not in str(info.value)


def test_identifier_limit_is_bytes_not_characters():
    assert validate_identifier("a" * MAX_IDENTIFIER_BYTES)
    assert validate_identifier("é" * 31, mode="relaxed")


@given(st.text(min_size=1, max_size=40))
def test_validation_either_returns_the_name_or_raises_config_error(name):
    for mode in ("strict", "relaxed"):
        try:
            assert validate_identifier(name, mode=mode) == name
        except ConfigError as exc:
            assert str(exc).startswith("identifiers: ")
