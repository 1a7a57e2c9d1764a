"""WASM functions as DuckDB scalar functions in the SQL transform engine."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.sql.node import SqlNode, SqlNodeError
from thalweg_bytewax.udf import UdfFailure, WasmFunction, WasmModule, WasmUdfError, sql_functions

from .wat import DIVIDE_100_BY_X, EXAMPLE, wat_module


@pytest.fixture(scope="module")
def example() -> WasmModule:
    return WasmModule.from_file(EXAMPLE)


def readings(n: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "celsius": pa.array([float(i % 50) - 10 if i % 7 else None for i in range(n)]),
            "a": pa.array(range(n), pa.int64()),
            "b": pa.array([i % 3 for i in range(n)], pa.int64()),
        }
    )


def test_a_query_calls_wasm_functions_by_their_sql_names(example: WasmModule) -> None:
    c2f = WasmFunction(
        example, "celsius_to_fahrenheit", args=["float64"], returns="float64", name="c2f"
    )
    div = WasmFunction(example, "safe_div", args=["int64", "int64"], returns="int64")
    node = SqlNode(
        "enrich",
        "SELECT c2f(celsius) AS f, safe_div(a, b) AS q FROM input WHERE a >= 1",
        functions=[c2f, div],
    )
    batch = readings(5000)  # more than one DuckDB vector (2,048 rows)
    out = node.run(batch)
    rest = batch.slice(1)
    assert out.column("f").equals(pc.add(pc.multiply(rest.column("celsius"), 1.8), 32.0))
    b = rest.column("b").to_pylist()
    assert out.column("q").to_pylist() == [
        None if d == 0 else a // d for a, d in zip(rest.column("a").to_pylist(), b, strict=True)
    ]
    # The node pickles (its database reopens, the functions registered again).
    assert pickle.loads(pickle.dumps(node)).run(batch).equals(out)


def test_a_nodes_functions_are_its_own(example: WasmModule) -> None:
    c2f = WasmFunction(
        example, "celsius_to_fahrenheit", args=["float64"], returns="float64", name="c2f"
    )
    SqlNode("with_udf", "SELECT c2f(celsius) AS f FROM input", functions=[c2f]).run(readings(3))
    plain = SqlNode("plain", "SELECT c2f(celsius) AS f FROM input")
    with pytest.raises(SqlNodeError, match=r"c2f"):
        plain.run(readings(3))


def test_a_failing_function_fails_the_query_with_its_kind_naming_the_node() -> None:
    bad = WasmFunction(
        wat_module(DIVIDE_100_BY_X), "f", args=["int64"], returns="int64", name="hundred_by"
    )
    node = SqlNode("divide", "SELECT hundred_by(b) AS h FROM input", functions=[bad])
    assert node.run(readings(3).slice(1)).column("h").to_pylist() == [100, 50]
    with pytest.raises(WasmUdfError) as caught:
        node.run(readings(3))
    assert caught.value.kind is UdfFailure.TRAP
    assert str(caught.value).startswith("sql `divide`: wasm udf `hundred_by` (hostile): trapped")
    assert sql_functions.take_failure() is None  # taken once, by the node
    # The next batch runs: the failure was the batch's, not the node's.
    assert node.run(readings(3).slice(1)).num_rows == 2


def test_a_function_named_like_a_builtin_is_refused_at_build(example: WasmModule) -> None:
    abs_ = WasmFunction(
        example, "celsius_to_fahrenheit", args=["float64"], returns="float64", name="abs"
    )
    with pytest.raises(
        ConfigError, match=r"sql `clash`: expected DuckDB to accept the functions `abs`"
    ):
        SqlNode("clash", "SELECT abs(celsius) FROM input", functions=[abs_])
