"""load_contract(): ODCS v3 to Arrow schema, natural key and rules; bad contracts fail at load."""

from __future__ import annotations

import http.server
import pickle
import threading
from functools import partial

import pyarrow as pa
import pytest

from tests.contracts.orders_data import ORDERS_CONTRACT
from thalweg_bytewax.contracts import (
    ContractError,
    ContractViolationError,
    load_contract,
    parse_contract,
)

BASE = """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test
name: t
version: 1.0.0
schema:
  - name: t
    properties:
      - name: id
        logicalType: string
        primaryKey: true
        required: true
      - name: amount
        logicalType: number
        physicalType: decimal(10,2)
        logicalTypeOptions: {exclusiveMinimum: 0, maximum: 1000}
      - name: code
        logicalType: string
        logicalTypeOptions: {pattern: "^[A-Z]+$"}
      - name: at
        logicalType: timestamp
"""


def test_orders_contract_resolves_schema_key_and_rules():
    c = load_contract(ORDERS_CONTRACT)
    schema = c.arrow_schema("orders")
    assert schema.field("order_id").type == pa.string()
    assert not schema.field("order_id").nullable
    assert schema.field("total").type == pa.decimal128(12, 2)
    assert schema.field("created_at").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("coupon").nullable
    assert schema.field("items").type.value_type.field("unit_price").type == pa.decimal128(10, 2)
    assert c.natural_key() == ("order_id",)
    assert c.descriptions()["total"] == "Order total in the order currency."
    names = {r.name for r in c.rules()}
    assert {"order_id_not_null", "order_id_unique", "status_allowed_values", "total_range"} <= names
    assert {"orders_have_items", "batch_not_empty", "coupon_mostly_absent"} <= names
    assert c.ignored_quality == ()


def test_number_bounds_and_formats_map_to_rules():
    c = parse_contract(BASE)
    rules = {r.name: r for r in c.rules()}
    assert rules["amount_range"].min == 0
    assert rules["amount_range"].min_inclusive is False
    assert rules["amount_range"].max == 1000
    assert rules["code_pattern"].pattern == "^[A-Z]+$"
    assert c.arrow_schema().field("at").type == pa.timestamp("us", tz="UTC")
    # Rule ids are name@version and stable across loads.
    assert [r.id for r in c.rules()] == [r.id for r in parse_contract(BASE).rules()]


def _bad(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (
            _bad("logicalType: number", "logicalType: money"),
            "`schema[0].properties[1].logicalType`",
        ),
        (BASE + "      - name: x\n    bad: [", "malformed YAML at line"),
        (_bad('{pattern: "^[A-Z]+$"}', '{pattern: "^(?=A)"}'), "`schema[0] rule `code_pattern``"),
        (
            BASE
            + "    quality:\n      - metric: nullValues\n        arguments: {properties: [nope]}\n"
            + "        mustBe: 0\n",
            "`schema[0].quality[0].arguments.properties[0]`",
        ),
        (
            BASE + "    quality:\n      - type: custom\n        engine: duckdb\n"
            '        implementation: "nope > 1"\n',
            "nope",
        ),
        (_bad("required: true", "required: maybe"), "`schema[0].properties[0].required`"),
        (_bad("apiVersion: v3.0.2", "apiVersion: v2.2.0"), "`apiVersion`"),
        (
            BASE
            + "    quality:\n      - metric: rowCount\n        mustBe: 1\n        mustBeLessThan: 3\n",
            "`schema[0].quality[0]`",
        ),
    ],
    ids=[
        "unknown-logical-type",
        "malformed-yaml",
        "regex",
        "missing-column",
        "sql-column",
        "pydantic",
        "version",
        "two-ops",
    ],
)
def test_bad_contracts_fail_at_load_naming_the_path(text, path):
    with pytest.raises(ContractError) as info:
        parse_contract(text, origin="bad.yaml")
    assert path in str(info.value)
    assert str(info.value).startswith("contract `bad.yaml`")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_load_from_http_and_fsspec(tmp_path):
    (tmp_path / "c.yaml").write_text(BASE)
    handler = partial(_QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll interval: `shutdown` waits up to one (0.5 s by default).
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/c.yaml"
        assert load_contract(url).arrow_schema() == parse_contract(BASE).arrow_schema()
    finally:
        server.shutdown()
        server.server_close()
    fsspec = pytest.importorskip("fsspec")
    with fsspec.open("memory://contracts/c.yaml", "w") as fh:
        fh.write(BASE)
    assert load_contract("memory://contracts/c.yaml").natural_key() == ("id",)
    assert load_contract(f"file://{tmp_path / 'c.yaml'}").natural_key() == ("id",)
    with pytest.raises(ContractError, match="cannot read"):
        load_contract(tmp_path / "absent.yaml")


def test_errors_pickle_round_trip():
    err = ContractViolationError("validate `v`: rule `r@1` failed", "r@1", "c", "t:0@1")
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.rule_id, back.column, back.locator) == (str(err), "r@1", "c", "t:0@1")
    cerr = pickle.loads(pickle.dumps(ContractError("contract `x`: `a`: b")))
    assert isinstance(cerr, ValueError)
