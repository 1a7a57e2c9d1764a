"""WASM functions in a SQL DAG: every node may call them; a failing batch goes to the DLQ."""

from __future__ import annotations

from dataclasses import dataclass

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Stream
from bytewax.operators import KeyedStream

from tests.helpers import run_flow
from thalweg_bytewax.lanes.dlq import DLQ_MESSAGE, DLQ_REASON
from thalweg_bytewax.operators.sql_dag import sql_dag
from thalweg_bytewax.records import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.sql.dag_nodes import SqlDagError
from thalweg_bytewax.sql.dag_runner import DagRunner
from thalweg_bytewax.udf import UdfFailure, WasmFunction, WasmUdfError

from .wat import DIVIDE_100_BY_X, EXAMPLE, wat_module

SCHEMA = pa.schema(
    [
        ("x", pa.int64()),
        ("celsius", pa.float64()),
        (C.source_topic, pa.string()),
        (C.source_partition, pa.int32()),
        (C.source_offset, pa.int64()),
    ]
)
DAG = SqlDag(
    [
        {"name": "warm", "query": "SELECT *, c2f(celsius) AS f FROM input"},
        {
            "name": "ratio",
            "query": "SELECT w.x, hundred_by(w.x) AS h, i.celsius FROM warm w "
            "JOIN input i USING (_twg_source_offset)",
            "depends_on": ["warm"],
        },
    ]
)


def functions() -> list[WasmFunction]:
    return [
        WasmFunction(
            EXAMPLE, "celsius_to_fahrenheit", args=["float64"], returns="float64", name="c2f"
        ),
        WasmFunction(
            wat_module(DIVIDE_100_BY_X), "f", args=["int64"], returns="int64", name="hundred_by"
        ),
    ]


def batch(partition: int, first: int, xs: list[int]) -> tuple[str, pa.RecordBatch]:
    n = len(xs)
    return f"t:{partition}", pa.record_batch(
        [
            pa.array(xs, pa.int64()),
            pa.array([float(x) for x in xs]),
            pa.array(["t"] * n),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(first, first + n), pa.int64()),
        ],
        schema=SCHEMA,
    )


def test_single_and_multi_relation_nodes_call_the_functions() -> None:
    fns = functions()
    DAG.bind(SCHEMA, functions=fns)
    out = DagRunner(DAG, functions=fns).run(batch(0, 0, [5, 4])[1])
    assert out["warm"].column("f").to_pylist() == [41.0, 39.2]
    assert sorted(out["ratio"].column("h").to_pylist()) == [20, 25]
    with pytest.raises(WasmUdfError) as caught:
        DagRunner(DAG, functions=fns).run(batch(0, 0, [5, 0])[1])
    assert caught.value.kind is UdfFailure.TRAP
    assert str(caught.value).startswith("sql `ratio`: wasm udf `hundred_by`")


def test_without_the_functions_the_dag_does_not_bind() -> None:
    with pytest.raises(SqlDagError, match=r"sql dag node `warm`: expected the query to bind.*c2f"):
        DAG.bind(SCHEMA)


def test_a_batch_a_function_fails_on_goes_to_the_dlq_and_the_flow_goes_on() -> None:
    items = [batch(0, 0, [5, 4]), batch(0, 2, [1, 0]), batch(1, 0, [2])]
    got = run_flow(
        items,
        dag_streams,
        flow_id="dag_udf",
    )
    ratios = sorted((k, sorted(b.column("h").to_pylist())) for k, b in got["ratio"] if b.num_rows)
    assert ratios == [("t:0", [20, 25]), ("t:1", [50])]
    [(key, rejected)] = got["rejected"]
    assert key == "t:0"
    assert rejected.column(C.source_offset).to_pylist() == [2, 3]
    assert set(rejected.column(DLQ_REASON).to_pylist()) == {"udf"}
    assert "integer divide by zero" in rejected.column(DLQ_MESSAGE)[0].as_py()


@dataclass(frozen=True)
class Out:
    ratio: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


def dag_streams(stream: Stream[tuple[str, pa.RecordBatch]]) -> Out:
    keyed = op.key_on("key", stream, lambda kv: kv[0])
    batches = op.map_value("batch", keyed, lambda kv: kv[1])
    out = sql_dag("dag", batches, DAG, schema=SCHEMA, functions=functions())
    assert out.rejected is not None
    return Out(out["ratio"], out.rejected)
