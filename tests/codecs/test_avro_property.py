"""Property tests: random Avro schemas and records decode identically on every path.

For each random schema, records written by fastavro must come back from
``decode_value``, from ``decode_batch`` on the exact path and from ``decode_batch`` with
the fast path enabled, all equal to what fastavro itself reads.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.codecs.avro_values import plain
from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import _avro_fast
from thalweg_bytewax.codecs.avro import AvroCodec

_names = itertools.count()
UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

_text = st.text(max_size=8)
_PRIMS: dict[str, Any] = {
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": _text,
    "bytes": st.binary(max_size=8),
}
_LOGICAL: list[tuple[dict[str, Any], Any]] = [
    ({"type": "int", "logicalType": "date"}, st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))),
    (
        {"type": "int", "logicalType": "time-millis"},
        st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    ),
    ({"type": "long", "logicalType": "time-micros"}, st.times()),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        st.integers(-(10**12), 10**13).map(lambda ms: _EPOCH + dt.timedelta(milliseconds=ms)),
    ),
    (
        {"type": "long", "logicalType": "timestamp-micros"},
        st.integers(-(10**15), 10**16).map(lambda us: _EPOCH + dt.timedelta(microseconds=us)),
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-millis"},
        st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
        ),
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-micros"},
        st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
    ),
    ({"type": "string", "logicalType": "uuid"}, st.uuids().map(str)),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        st.integers(-(10**9) + 1, 10**9 - 1).map(lambda v: Decimal(v).scaleb(-2)),
    ),
]


def _name() -> str:
    return f"T{next(_names)}"


@st.composite
def _type(draw: st.DrawFn, depth: int) -> tuple[Any, Any]:
    choices = ["prim", "logical", "enum", "fixed", "nullable"]
    if depth > 0:
        choices += ["record", "array", "map", "union"]
    kind = draw(st.sampled_from(choices))
    if kind == "prim":
        name = draw(st.sampled_from(sorted(_PRIMS)))
        return name, _PRIMS[name]
    if kind == "logical":
        logical: tuple[dict[str, Any], Any] = draw(st.sampled_from(_LOGICAL))
        return logical
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from("ABCDEFG"), min_size=1, max_size=4, unique=True))
        return {"type": "enum", "name": _name(), "symbols": symbols}, st.sampled_from(symbols)
    if kind == "fixed":
        size = draw(st.integers(1, 6))
        schema = {"type": "fixed", "name": _name(), "size": size}
        return schema, st.binary(min_size=size, max_size=size)
    if kind == "nullable":
        inner, values = draw(_type(depth - 1 if depth else 0))
        if isinstance(inner, list):
            return inner, values
        order = draw(st.booleans())
        return (["null", inner] if order else [inner, "null"]), st.none() | values
    if kind == "record":
        return draw(_record(depth - 1))
    if kind == "array":
        inner, values = draw(_type(depth - 1))
        return {"type": "array", "items": inner}, st.lists(values, max_size=3)
    if kind == "map":
        inner, values = draw(_type(depth - 1))
        return {"type": "map", "values": inner}, st.dictionaries(_text, values, max_size=3)
    # a general union: null, one of int/string, and a record (branches stay distinguishable)
    rec, rec_values = draw(_record(0))
    prim = draw(st.sampled_from(["int", "string"]))
    return ["null", prim, rec], st.none() | _PRIMS[prim] | rec_values


@st.composite
def _record(draw: st.DrawFn, depth: int) -> tuple[dict[str, Any], Any]:
    n = draw(st.integers(1, 4))
    fields = []
    values = {}
    for i in range(n):
        schema, strategy = draw(_type(depth))
        fields.append({"name": f"f{i}", "type": schema})
        values[f"f{i}"] = strategy
    return {"type": "record", "name": _name(), "fields": fields}, st.fixed_dictionaries(values)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    schema, records = draw(_record(2))
    return schema, draw(st.lists(records, min_size=1, max_size=6))


def _same(a: Any, b: Any) -> bool:
    """Equality where float32 round-trips and -0.0 / 0.0 compare as Avro stores them."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b and type(a) is type(b)) or (a == b and not isinstance(a, bool | float))


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(_cases())
def test_random_schemas_round_trip_on_every_path(case: tuple[dict[str, Any], list[Any]]) -> None:
    schema, records = case
    parsed = fastavro.parse_schema(schema)
    bodies = []
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        bodies.append(buf.getvalue())
    expected = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies]
    expected = [_uuid_text(e) for e in expected]
    fast = AvroCodec(framing="none", schema=schema)
    exact = AvroCodec(framing="none", schema=schema, engine="fastavro")

    values = [exact.decode_value(b) for b in bodies]
    r_exact = exact.decode_batch(bodies)
    r_fast = fast.decode_batch(bodies)

    assert _same(values, expected)
    assert r_exact.errors == [] and r_fast.errors == []
    assert r_exact.batch.schema == r_fast.batch.schema == exact.arrow_schema
    rows = [
        {f.name: plain(row[f.name], f.type) for f in r_exact.batch.schema}
        for row in r_exact.batch.to_pylist()
    ]
    assert _same(rows, expected)
    assert r_fast.batch.equals(r_exact.batch)
    writer = fast._schemas.writers["fixed"]
    if _avro_fast.supported(writer.node):
        header = _avro_fast.ocf_header(_avro_fast.ocf_schema_json(schema, {}))
        block = _avro_fast.decode_block(header, writer.node, pa.array(bodies, pa.binary()))
        assert block is not None, "fast path refused a schema inside its proven subset"
        assert block.equals(r_exact.batch)


def _uuid_text(value: Any) -> Any:
    import uuid

    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _uuid_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_uuid_text(v) for v in value]
    return value
