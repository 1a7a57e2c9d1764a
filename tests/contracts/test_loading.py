"""Contract loading: quoted ``${column}``, the object's own names in SQL checks, enum
entries without a value, and ``array`` properties without ``items``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from thalweg_bytewax.contracts import ContractError, RuleSet, parse_contract
from thalweg_bytewax.contracts.evaluate import evaluate

HEAD = """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test:load
name: load
version: 1.0.0
schema:
"""


def _failed(contract_text: str, batch: pa.RecordBatch) -> list[list[str]]:
    rs = RuleSet.from_contract(parse_contract(contract_text, origin="t.yaml"))
    ev = evaluate(batch, rs)
    return [[r.split("@")[0] for r in row] for row in ev.failed_rules(rs).to_pylist()]


@pytest.mark.parametrize("name", ['weird"col', 'x" IS NULL OR "x', "a b", "Ünïcode"])
def test_the_column_placeholder_is_quoted_as_an_identifier(name):
    text = HEAD + (
        "  - name: t\n"
        "    properties:\n"
        f"      - name: {name!r}\n"
        "        logicalType: integer\n"
        "        quality:\n"
        "          - type: sql\n"
        "            name: no_nulls\n"
        "            query: SELECT count(*) FROM ${table} WHERE ${column} IS NULL\n"
        "            mustBe: 0\n"
    )
    good = pa.RecordBatch.from_pydict({name: pa.array([1, 2], pa.int64())})
    bad = pa.RecordBatch.from_pydict({name: pa.array([1, None], pa.int64())})
    assert _failed(text, good) == [[], []]
    assert _failed(text, bad) == [["no_nulls"], ["no_nulls"]]


AIR = HEAD + """\
  - name: air_quality
    physicalName: analytics.air_quality_v1
    properties:
      - name: pm25
        logicalType: number
    quality:
      - type: sql
        name: by_name
        query: select count(*) from air_quality where pm25 < 0
        mustBe: 0
      - type: sql
        name: by_physical_name
        query: SELECT count(*) FROM "air_quality_v1" WHERE pm25 > 1000
        mustBe: 0
      - type: sql
        name: by_placeholder
        query: SELECT count(*) FROM ${table} WHERE pm25 = 500
        mustBe: 0
"""


def test_a_sql_check_may_name_its_own_schema_object():
    ok = pa.RecordBatch.from_pydict({"pm25": [1.0, 2.0]})
    assert _failed(AIR, ok) == [[], []]
    assert _failed(AIR, pa.RecordBatch.from_pydict({"pm25": [-1.0, 2.0]})) == [["by_name"]] * 2
    high = pa.RecordBatch.from_pydict({"pm25": [2000.0]})
    assert _failed(AIR, high) == [["by_physical_name"]]
    assert _failed(AIR, pa.RecordBatch.from_pydict({"pm25": [500.0]})) == [["by_placeholder"]]


def test_a_query_that_does_not_name_its_object_keeps_its_rule_version():
    text = AIR.replace("from air_quality where", "from ${table} where")
    rule = {r.name: r for r in parse_contract(text).rules()}["by_name"]
    assert rule.expression == "select count(*) from batch where pm25 < 0"


def _enum(entries: str) -> str:
    return HEAD + (
        "  - name: t\n"
        "    properties:\n"
        "      - name: status\n"
        "        logicalType: string\n"
        f"        enum: {entries}\n"
    )


def test_an_enum_entry_with_only_a_label_is_refused_at_load():
    with pytest.raises(ContractError) as info:
        parse_contract(_enum("[{value: PAID, label: Paid}, {label: Shipped}]"), origin="e.yaml")
    text = str(info.value)
    assert text.startswith("contract `e.yaml`: `schema[0].properties[0].enum[1].value`")
    assert "'Shipped'" in text


def test_an_enum_with_values_still_loads():
    batch = pa.RecordBatch.from_pydict({"status": ["PAID", "LOST", None]})
    text = _enum("[{value: PAID, label: Paid}, {value: SHIPPED}]")
    assert _failed(text, batch) == [[], ["status_allowed_values"], []]


def _array(extra: str) -> str:
    return HEAD + (
        "  - name: t\n"
        "    properties:\n"
        "      - name: tags\n"
        "        logicalType: array\n"
        f"{extra}"
    )


@pytest.mark.parametrize(
    ("physical", "expected"),
    [
        ("", pa.list_(pa.string())),
        ("        physicalType: array\n", pa.list_(pa.string())),
        ("        physicalType: array<bigint>\n", pa.list_(pa.int64())),
        ("        physicalType: double[]\n", pa.list_(pa.float64())),
        ("        physicalType: list<decimal(10,2)>\n", pa.list_(pa.decimal128(10, 2))),
    ],
)
def test_an_array_without_items_is_a_list_of_strings_unless_the_physical_type_says(
    physical, expected
):
    assert parse_contract(_array(physical)).arrow_schema().field("tags").type == expected


def test_an_array_without_items_accepts_scalar_lists_and_refuses_nested_ones():
    text = _array("")
    ok = pa.RecordBatch.from_pydict({"tags": pa.array([["a"], [], None])})
    assert _failed(text, ok) == [[], [], []]
    nested = pa.RecordBatch.from_pydict({"tags": pa.array([[{"k": 1}]])})
    assert _failed(text, nested) == [["tags_type"]]


def _amount(physical: str, options: str = "") -> str:
    return HEAD + (
        "  - name: t\n"
        "    properties:\n"
        "      - name: amount\n"
        "        logicalType: number\n"
        f"        physicalType: {physical}\n"
        f"{options}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_amount("decimal(38,2)"), pa.decimal128(38, 2)),
        (_amount("decimal(40,2)"), pa.decimal256(40, 2)),
        (_amount("numeric", "        logicalTypeOptions: {precision: 76, scale: 10}\n"),
         pa.decimal256(76, 10)),  # fmt: skip
        (_array("        physicalType: list<decimal(50,5)>\n"), pa.list_(pa.decimal256(50, 5))),
    ],
)
def test_wide_decimals_load_as_decimal256(text, expected):
    schema = parse_contract(text).arrow_schema()
    assert schema.field(schema.names[0]).type == expected


@pytest.mark.parametrize(
    "text",
    [
        _amount("decimal(77,2)"),
        _amount("decimal(5,7)"),
        _amount("numeric", "        logicalTypeOptions: {precision: 0}\n"),
        _array("        physicalType: list<decimal(90,1)>\n"),
    ],
)
def test_a_decimal_out_of_range_is_a_contract_error_naming_the_property(text):
    with pytest.raises(ContractError, match=r"schema\[0\]\.properties\[0\].*precision"):
        parse_contract(text, origin="t.yaml")
