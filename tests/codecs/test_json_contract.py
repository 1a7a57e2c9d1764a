"""JsonCodec from a data contract: schema beats inference, both paths agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.codecs.json import JsonCodec, JsonDecodeError
from thalweg_bytewax.contracts import ContractError, ContractSpec, load_contract
from thalweg_bytewax.dev.samples import sample_orders
from thalweg_bytewax.errors import ConfigError

# Every test runs on each columnar reader (tests/codecs/conftest.py).
pytestmark = pytest.mark.usefixtures("json_engine")

CONTRACT = Path(__file__).parents[2] / "thalweg_bytewax" / "flows" / "contracts" / "orders.odcs.yaml"
ORDERS = list(sample_orders(64))


@pytest.fixture(scope="module")
def contract() -> ContractSpec:
    return load_contract(CONTRACT)


@pytest.fixture
def codec(contract: ContractSpec, json_engine: str) -> JsonCodec:
    return JsonCodec(schema=contract)


def dumps(doc: Any) -> bytes:
    return orjson.dumps(doc, default=str)


def test_contract_types_are_decoded_without_inference(
    contract: ContractSpec, codec: JsonCodec
) -> None:
    want = contract.arrow_schema()
    assert codec.arrow_schema.equals(want, check_metadata=True)
    assert {str(f.type) for f in want} >= {"decimal128(12, 2)", "timestamp[ms, tz=UTC]"}
    res = codec.decode_batch([dumps(o) for o in ORDERS])
    assert res.errors == []
    assert res.batch.schema.equals(want, check_metadata=True)
    rows = res.batch.to_pylist()
    assert rows == ORDERS  # Decimal totals, ms timestamps, int32 quantities, structs
    assert rows == [codec.decode_value(dumps(o)) for o in ORDERS]
    named = JsonCodec(schema=contract, object_name="orders")
    assert named.arrow_schema.equals(want)


def _with(order: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(dumps(order))
    *parents, leaf = path.split(".")
    node: Any = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is _MISSING:
        del node[leaf]
    else:
        node[leaf] = value
    return doc


_MISSING = object()
BAD = [
    ("status", _MISSING, "`status`: required; got missing"),
    ("items.0.sku", None, "`items[].sku`: required; got null"),
    ("total", 881.37, "`total`: expected a decimal"),
    ("total", "881.375", "`total`: expected a decimal"),
    ("total", "1e20", "`total`: expected a decimal"),
    ("created_at", "2026-01-04T11:20:26.767123+00:00", "`created_at`"),
    ("created_at", "2026-01-04T11:20:26", "`created_at`: expected an RFC 3339"),
    ("items.0.quantity", 2**31, "`items[].quantity`: expected an integer (int32)"),
    ("customer_id", "7", "`customer_id`: expected an integer"),
]


def test_documents_violating_the_contract_are_decode_failures(codec: JsonCodec) -> None:
    payloads = [dumps(ORDERS[0])]
    for path, value, _ in BAD:
        payloads += [dumps(_with(ORDERS[1], path, value)), dumps(ORDERS[2])]
    res = codec.decode_batch(pa.array(payloads, pa.binary()))
    assert [e.index for e in res.errors] == list(range(1, 2 * len(BAD), 2))
    assert res.batch.num_rows == len(BAD) + 1
    for err, (path, value, text) in zip(res.errors, BAD, strict=True):
        assert err.kind is FailureKind.SCHEMA_MISMATCH and text in err.message, err
        with pytest.raises(JsonDecodeError) as info:
            codec.decode_value(dumps(_with(ORDERS[1], path, value)))
        assert str(info.value) == err.message


def test_object_name_is_checked(contract: ContractSpec) -> None:
    with pytest.raises(ContractError, match="'nope'"):
        JsonCodec(schema=contract, object_name="nope")
    with pytest.raises(ConfigError, match="object_name"):
        JsonCodec(schema=contract.arrow_schema(), object_name="orders")


_PATHS = ["total", "items.0.unit_price", "created_at", "items.0.quantity", "customer_id"]
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.datetimes().map(lambda d: d.isoformat() + st_suffix(d)),
    st.sampled_from(["", "x", None, True, [], {}]),
)


def st_suffix(d: Any) -> str:
    return "+00:00" if d.microsecond % 2 else ""


# The codec holds no state between batches, so one per engine serves every example.
@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _VALUES), min_size=1, max_size=6))
def test_random_contract_corruptions_agree_across_paths(
    codec: JsonCodec, cases: list[tuple[str, Any]]
) -> None:
    payloads = [dumps(_with(ORDERS[i], p, v)) for i, (p, v) in enumerate(cases)]
    res = codec.decode_batch(payloads)
    by_index = {e.index: e for e in res.errors}
    rows = iter(res.batch.to_pylist())
    for i, p in enumerate(payloads):
        try:
            value = codec.decode_value(p)
        except JsonDecodeError as exc:
            assert by_index[i].kind is exc.kind and by_index[i].message == str(exc)
        else:
            assert i not in by_index, by_index[i]
            assert next(rows) == value
