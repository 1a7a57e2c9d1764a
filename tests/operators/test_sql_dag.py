"""sql_dag: the whole DAG per batch in one step, one stream per node, sinks at any node."""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

from tests.fixtures.flows import EntryPoint
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.operators.sql_dag import sql_dag
from thalweg_bytewax.records import DEFAULT_COLUMNS, record_ids_array
from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.sql.dag_nodes import SqlDagError

C = DEFAULT_COLUMNS
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("amount", pa.float64()),
        (C.source_topic, pa.string()),
        (C.source_partition, pa.int32()),
        (C.source_offset, pa.int64()),
        (C.record_id, pa.binary(16)),
    ]
)
DAG = """
[[nodes]]
name = "clean"
query = "SELECT * FROM input WHERE amount > 0"
sink = "clean_lane"

[[nodes]]
name = "big"
query = "SELECT * FROM clean WHERE amount > 100"
depends_on = ["clean"]
sink = "big_lane"

[[nodes]]
name = "small"
query = "SELECT * FROM clean WHERE amount <= 100"
depends_on = ["clean"]

[[nodes]]
name = "per_batch"
query = "SELECT count(*) AS n, sum(amount) AS total FROM clean"
depends_on = ["clean"]
"""


def batch(partition: int, first: int, amounts: list[float]) -> tuple[str, pa.RecordBatch]:
    offsets = pa.array(range(first, first + len(amounts)), pa.int64())
    return f"orders:{partition}", pa.record_batch(
        [
            pa.array([partition * 1000 + o for o in offsets.to_pylist()], pa.int64()),
            pa.array(amounts, pa.float64()),
            pa.array(["orders"] * len(amounts)),
            pa.array([partition] * len(amounts), pa.int32()),
            offsets,
            record_ids_array(None, "orders", partition, offsets, pa.array([b"v"] * len(amounts))),
        ],
        schema=SCHEMA,
    )


INPUT = [
    batch(0, 0, [5.0, -1.0, 250.0]),
    batch(1, 0, [120.0, 80.0]),
    batch(0, 3, [-3.0, 40.0]),
    batch(1, 2, [900.0]),
]


def test_a_shared_node_runs_once_per_batch_and_sinks_attach_at_interior_nodes(
    tmp_path: Path, entry_point: EntryPoint
) -> None:
    flow = Dataflow("dag")
    up = op.input("in", flow, TestingSource(INPUT))
    sinks = {
        "clean_lane": ParquetSink(tmp_path / "clean", shards=2),
        "big_lane": ParquetSink(tmp_path / "big", shards=2),
    }
    out = sql_dag("transform", up, SqlDag.from_toml(DAG), schema=SCHEMA, sinks=sinks)
    small: list[tuple[str, pa.RecordBatch]] = []
    totals: list[tuple[str, pa.RecordBatch]] = []
    op.output("small", out["small"], TestingSink(small))
    op.output("totals", out["per_batch"], TestingSink(totals))
    entry_point(flow)

    # `clean` has three dependents and a sink: one query per batch, not one per dependent.
    assert out.runner.batches == len(INPUT)
    assert out.runner.runs == dict.fromkeys(["clean", "big", "small", "per_batch"], len(INPUT))

    clean = read_lane(tmp_path / "clean").sort_by("id")
    assert clean.column("amount").to_pylist() == [5.0, 250.0, 40.0, 120.0, 80.0, 900.0]
    big = read_lane(tmp_path / "big").sort_by("id")
    assert big.column("amount").to_pylist() == [250.0, 120.0, 900.0]
    assert sorted(v for _, b in small for v in b.column("amount").to_pylist()) == [
        5.0,
        40.0,
        80.0,
    ]
    assert all(key.startswith("orders:") for key, _ in small)
    per_key: dict[str, float] = {}
    for key, b in totals:
        per_key[key] = per_key.get(key, 0.0) + b.column("total")[0].as_py()
    assert per_key == {"orders:0": 295.0, "orders:1": 1100.0}


def test_an_empty_node_result_is_not_emitted() -> None:
    flow = Dataflow("dag")
    up = op.input("in", flow, TestingSource([batch(0, 0, [-1.0, -2.0])]))
    out = sql_dag("transform", up, SqlDag.from_toml(DAG), schema=SCHEMA)
    got: list[tuple[str, pa.RecordBatch]] = []
    totals: list[tuple[str, pa.RecordBatch]] = []
    op.output("clean", out["clean"], TestingSink(got))
    op.output("totals", out["per_batch"], TestingSink(totals))
    run_main(flow)
    assert got == []
    # An aggregate over no rows has no contributor, so no locator: nothing to emit.
    assert totals == []


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (
            [{"name": "a", "query": "SELECT * FROM orders"}],
            "sql dag node `a`: reads unknown relation `orders`",
        ),
        (
            [
                {"name": "a", "query": "SELECT * FROM b", "depends_on": ["b"]},
                {"name": "b", "query": "SELECT * FROM a", "depends_on": ["a"]},
            ],
            "expected no cycle",
        ),
        (
            [{"name": "a", "query": "SELECT id, price FROM input"}],
            "sql dag node `a`: expected the query to bind against its inputs (`input`: id, "
            "amount, _twg_source_topic",
        ),
        (
            [
                {"name": "a", "query": "SELECT * FROM input"},
                {"name": "a", "query": "SELECT id FROM input"},
            ],
            "sql dag node `a`: expected unique node names",
        ),
    ],
)
def test_a_bad_dag_fails_at_flow_build_naming_the_node(
    nodes: list[dict[str, object]], expected: str
) -> None:
    flow = Dataflow("dag")
    up = op.input("in", flow, TestingSource(INPUT))
    with pytest.raises(SqlDagError) as info:
        sql_dag("transform", up, SqlDag(nodes), schema=SCHEMA)
    assert expected in str(info.value)


def test_a_sink_on_an_unknown_node_fails_at_flow_build(tmp_path: Path) -> None:
    flow = Dataflow("dag")
    up = op.input("in", flow, TestingSource(INPUT))
    dag = SqlDag.from_toml(DAG)
    sinks = {
        "clean_lane": ParquetSink(tmp_path / "c"),
        "big_lane": ParquetSink(tmp_path / "b"),
        "huge_lane": ParquetSink(tmp_path / "h"),
    }
    with pytest.raises(SqlDagError, match=r"sink `huge_lane` is attached to no node"):
        sql_dag("transform", up, dag, schema=SCHEMA, sinks=sinks)
    with pytest.raises(SqlDagError, match=r"node `big`: names sink `big_lane`, which `sinks`"):
        sql_dag("transform2", up, dag, schema=SCHEMA, sinks={"clean_lane": sinks["clean_lane"]})


def test_an_unknown_node_has_no_stream() -> None:
    flow = Dataflow("dag")
    up = op.input("in", flow, TestingSource(INPUT))
    dag = SqlDag(
        [
            {"name": "pre", "query": "SELECT id, amount FROM input"},
            {"name": "post", "query": "SELECT id FROM pre", "depends_on": ["pre"]},
        ]
    )
    out = sql_dag("transform", up, dag, schema=SCHEMA)
    assert out["pre"] is out["pre"]  # one step per node, however often it is asked for
    with pytest.raises(SqlDagError, match=r"expected one of the nodes \['post', 'pre'\]"):
        out["nope"]
