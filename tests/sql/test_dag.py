"""SqlDag: build-time refusals name the node; a shared node runs once per batch."""

from __future__ import annotations

import pickle
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_COLUMNS
from thalweg_bytewax.sql.dag import SqlDag, table_references
from thalweg_bytewax.sql.dag_nodes import SqlDagError, SqlNode
from thalweg_bytewax.sql.dag_runner import DagRunner, SqlDagRunError

SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("tags", pa.list_(pa.string()))])
BATCH = pa.record_batch(
    [
        pa.array([1, 2, 3, 4]),
        pa.array([-5.0, 20.0, 150.0, 900.0]),
        pa.array([["a"], [], ["b", "c"], None], pa.list_(pa.string())),
    ],
    schema=SCHEMA,
)

# `clean` has three dependents; `post` joins a node with the input, so it runs as written.
DIAMOND = [
    SqlNode(name="clean", query="SELECT * FROM input WHERE amount > 0"),
    SqlNode(
        name="big",
        query="SELECT id, amount FROM clean WHERE amount > 100",
        depends_on=("clean",),
        sink="big_lane",
    ),
    SqlNode(name="small", query="SELECT id FROM clean WHERE amount <= 100", depends_on=("clean",)),
    SqlNode(
        name="tags",
        query="SELECT id, unnest(tags) AS tag FROM clean",
        depends_on=("clean",),
    ),
    SqlNode(name="pre", query="SELECT id, amount * 2 AS doubled FROM input"),
    SqlNode(
        name="post",
        query="SELECT pre.id, doubled, input.amount FROM pre JOIN input USING (id) "
        "WHERE doubled > 0 ORDER BY pre.id",
        depends_on=("pre",),
    ),
]


def refusal(nodes: list[SqlNode | dict[str, object]]) -> str:
    with pytest.raises(SqlDagError) as info:
        SqlDag(nodes)
    return str(info.value)


def test_unknown_relation_is_refused_naming_the_node() -> None:
    msg = refusal([{"name": "a", "query": "SELECT * FROM nowhere"}])
    assert msg.startswith("sql dag node `a`: reads unknown relation `nowhere`")


def test_unknown_dependency_is_refused_naming_the_node() -> None:
    msg = refusal([{"name": "a", "query": "SELECT * FROM ghost", "depends_on": ["ghost"]}])
    assert msg.startswith("sql dag node `a`: depends on unknown relation `ghost`")


def test_schema_qualified_relation_is_never_a_node() -> None:
    msg = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input"},
            {"name": "b", "query": "SELECT * FROM main.a", "depends_on": ["a"]},
        ]
    )
    assert "node `b`: reads unknown relation `main.a`" in msg


def test_cycle_is_refused_naming_its_nodes() -> None:
    msg = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input JOIN c USING (id)", "depends_on": ["c"]},
            {"name": "b", "query": "SELECT * FROM a", "depends_on": ["a"]},
            {"name": "c", "query": "SELECT * FROM b", "depends_on": ["b"]},
        ]
    )
    assert "expected no cycle; got" in msg
    assert all(f"`{n}`" in msg for n in "abc")


def test_self_dependency_is_a_cycle() -> None:
    msg = refusal([{"name": "a", "query": "SELECT * FROM a", "depends_on": ["a"]}])
    assert msg.startswith("sql dag node `a`: expected no cycle")


def test_duplicate_node_name_is_refused() -> None:
    msg = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input"},
            {"name": "a", "query": "SELECT id FROM input"},
        ]
    )
    assert msg.startswith("sql dag node `a`: expected unique node names")


def test_one_sink_takes_one_node() -> None:
    msg = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input", "sink": "lane"},
            {"name": "b", "query": "SELECT * FROM input", "sink": "lane"},
        ]
    )
    assert msg.startswith("sql dag node `b`: sink `lane` is already fed by node `a`")


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({"name": "Big", "query": "SELECT 1"}, "expected a snake_case name"),
        ({"name": "input", "query": "SELECT 1"}, "`input` is the input batch"),
        ({"name": "a", "query": "SELECT 1", "sink": "my lane"}, "snake_case sink name"),
        ({"name": "a", "query": "SELECT 1", "materialize": True}, "field `materialize`"),
        ({"name": "a", "query": "DELETE FROM input"}, "expected exactly one SELECT"),
        ({"name": "a", "query": "SELECT 1; SELECT 2"}, "expected exactly one SELECT"),
        ({"name": "a", "query": "SELECT FROM WHERE"}, "expected one SELECT"),
        (
            {"name": "a", "query": "SELECT * FROM input, read_csv('/etc/passwd')"},
            "table function `read_csv`",
        ),
    ],
)
def test_bad_node_fields_are_refused_naming_the_node(
    node: dict[str, object], expected: str
) -> None:
    msg = refusal([node])
    assert msg.startswith(f"sql dag node `{node['name']}`: ")
    assert expected in msg


def test_a_read_must_be_declared_and_a_declaration_read() -> None:
    undeclared = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input"},
            {"name": "b", "query": "SELECT * FROM a"},
        ]
    )
    assert "node `b`: reads node `a` without listing it; add it to depends_on" in undeclared
    unread = refusal(
        [
            {"name": "a", "query": "SELECT * FROM input"},
            {"name": "b", "query": "SELECT * FROM input", "depends_on": ["a"]},
        ]
    )
    assert "node `b`: lists `a` in depends_on but its query never reads it" in unread


def test_table_references_skip_ctes_and_keep_qualifiers() -> None:
    refs = table_references(
        "WITH c AS (SELECT * FROM a) SELECT * FROM c JOIN Main.B USING (id) "
        "WHERE id IN (SELECT id FROM d)"
    )
    assert refs == {"a", "d", "main.b"}


def test_table_references_bind_cte_names_only_in_their_scope() -> None:
    # `c` is a CTE inside the subquery only: the outer `c` is a node read.
    inner = table_references("SELECT * FROM (WITH c AS (SELECT * FROM a) SELECT * FROM c), c")
    assert inner == {"a", "c"}
    # A body sees earlier siblings, not later ones nor itself.
    assert table_references("WITH x AS (SELECT * FROM y), y AS (SELECT 1) SELECT * FROM x") == {"y"}
    assert table_references(
        "WITH x AS (SELECT * FROM input), y AS (SELECT * FROM x) SELECT * FROM y"
    ) == {"input"}


@pytest.mark.parametrize(
    "query", ["SELECT * FROM (SHOW TABLES)", "SELECT * FROM input, (DESCRIBE input)"]
)
def test_show_and_describe_are_refused_naming_the_node(query: str) -> None:
    msg = refusal([{"name": "a", "query": query}])
    assert msg.startswith("sql dag node `a`: expected reads of `input` and nodes only; got a SHOW")


def test_missing_column_is_refused_at_bind_naming_the_node() -> None:
    dag = SqlDag(
        [
            {"name": "a", "query": "SELECT id FROM input"},
            {"name": "b", "query": "SELECT id, amount FROM a", "depends_on": ["a"]},
        ]
    )
    with pytest.raises(SqlDagError) as info:
        dag.bind(SCHEMA)
    msg = str(info.value)
    assert msg.startswith("sql dag node `b`: expected the query to bind against its inputs")
    assert "`a`: id" in msg and '"amount" not found' in msg


def test_bind_resolves_every_output_schema() -> None:
    schemas = SqlDag(DIAMOND).bind(SCHEMA)
    assert list(schemas) == list(SqlDag(DIAMOND).order)
    # An unnest node numbers the rows derived from one parent (lineage, ADR-0004).
    assert schemas["tags"] == pa.schema(
        [("id", pa.int64()), ("tag", pa.string()), ("_twg_derived_ordinal", pa.int32())]
    )
    assert schemas["post"].field("doubled").type == pa.float64()


def test_a_sink_node_must_keep_the_locator() -> None:
    c = DEFAULT_COLUMNS
    schema = SCHEMA.append(pa.field(c.source_topic, pa.string()))
    schema = schema.append(pa.field(c.source_partition, pa.int32()))
    schema = schema.append(pa.field(c.source_offset, pa.int64()))
    # One relation: the engine re-attaches the locator of each row's origin.
    kept = SqlDag([{"name": "a", "query": "SELECT id FROM input WHERE id > 1", "sink": "lane"}])
    assert c.source_offset in kept.bind(schema)["a"].names
    # A join runs as written: its output must select the locator itself.
    lossy = SqlDag(
        [
            {"name": "a", "query": "SELECT * FROM input"},
            {
                "name": "b",
                "query": "SELECT input.id FROM input JOIN a USING (id)",
                "depends_on": ["a"],
                "sink": "lane",
            },
        ]
    )
    with pytest.raises(SqlDagError, match=r"node `b`: feeds sink `lane` but its rows lose"):
        lossy.bind(schema)


def test_a_shared_node_runs_once_per_batch() -> None:
    dag = SqlDag(DIAMOND)
    assert dag.dependents["clean"] == ("big", "small", "tags")
    runner = DagRunner(dag)
    for _ in range(3):
        out = runner.run(BATCH)
    assert runner.batches == 3
    # Three dependents, one run per batch.
    assert runner.runs == dict.fromkeys(["clean", "big", "small", "tags", "pre", "post"], 3)
    assert set(out) == set(runner.runs)
    assert out["big"].to_pydict() == {"id": [3, 4], "amount": [150.0, 900.0]}
    assert out["small"].column("id").to_pylist() == [2]
    assert sorted(out["tags"].column("tag").to_pylist()) == ["b", "c"]
    assert out["post"].column("doubled").to_pylist() == [40.0, 300.0, 1800.0]


def test_runner_results_equal_each_node_run_on_its_own() -> None:
    # The reference: every node as a plain DuckDB query over its inputs.
    con = duckdb.connect()
    con.register("input", pa.Table.from_batches([BATCH]))
    dag = SqlDag(DIAMOND)
    for name in dag.order:
        con.register(name, con.sql(dag.nodes[name].query).to_arrow_table())
    out = DagRunner(dag).run(BATCH)
    for name, batch in out.items():
        expected = con.sql(f"SELECT * FROM {name}").to_arrow_table()
        got = pa.Table.from_batches([batch]).select(expected.column_names)
        assert got.equals(expected), name


def test_materialise_false_is_refused() -> None:
    msg = refusal([{"name": "a", "query": "SELECT * FROM input", "materialise": False}])
    assert msg.startswith("sql dag node `a`: expected `materialise = true`; got false")


def test_a_failing_query_at_run_time_names_the_node() -> None:
    dag = SqlDag([{"name": "a", "query": "SELECT CAST(tags[1] AS INTEGER) AS n FROM input"}])
    dag.bind(SCHEMA)
    with pytest.raises(SqlDagRunError, match=r"^sql dag node `a`: the query failed on a batch"):
        DagRunner(dag).run(BATCH)


def test_from_toml_text_and_path(tmp_path: Path) -> None:
    text = """
[[nodes]]
name = "clean"
query = "SELECT * FROM input WHERE amount > 0"

[[nodes]]
name = "big"
query = '''
SELECT id FROM clean -- a comment
WHERE amount > 100
'''
depends_on = ["clean"]
sink = "big_lane"
"""
    path = tmp_path / "dag.toml"
    path.write_text(text)
    for dag in (SqlDag.from_toml(text), SqlDag.from_toml(path), SqlDag.from_toml(str(path))):
        assert dag.order == ("clean", "big")
        assert dag.sinks == {"big_lane": "big"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodes = 1\n", "expected `[[nodes]]` tables only"),
        ("[[node]]\nname = 'a'\n", "expected `[[nodes]]` tables only"),
        ("[[nodes]\n", "expected TOML"),
        ("[[nodes]]\nname = 'a'\n", "field `query`: field required"),
    ],
)
def test_bad_toml_is_refused(text: str, expected: str) -> None:
    with pytest.raises(SqlDagError) as info:
        SqlDag.from_toml(text)
    assert expected in str(info.value)


def test_missing_toml_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SqlDagError, match=r"expected a readable TOML file"):
        SqlDag.from_toml(tmp_path / "absent.toml")


def test_errors_are_config_errors_and_pickle() -> None:
    err = SqlDagError("sql dag node `a`: boom")
    assert isinstance(err, ConfigError)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # noqa: S301 - our own bytes
    run_err = SqlDagRunError("sql dag node `a`: boom")
    assert str(pickle.loads(pickle.dumps(run_err))) == str(run_err)  # noqa: S301


# -- properties --------------------------------------------------------------------------


@st.composite
def random_dags(draw: st.DrawFn) -> tuple[list[dict[str, object]], bool]:
    """Random nodes and whether a DAG of them must be accepted.

    Each node reads some relations (other nodes, itself, ``input``, or an unknown one)
    and declares ``depends_on``, sometimes not matching what it reads.
    """
    n = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(n)]
    nodes: list[dict[str, object]] = []
    valid = True
    edges: dict[str, set[str]] = {}
    for name in names:
        reads = draw(st.sets(st.sampled_from([*names, "input", "ghost"]), max_size=3))
        declared = reads - {"input"}
        if draw(st.integers(0, 9)) == 0:  # sometimes lie about the dependencies
            declared ^= {draw(st.sampled_from(names))}
        if "ghost" in reads or declared != reads - {"input"}:
            valid = False
        edges[name] = declared & set(names)
        source = ", ".join(sorted(reads)) if reads else None
        query = f"SELECT 1 AS one FROM {source}" if source else "SELECT 1 AS one"
        nodes.append({"name": name, "query": query, "depends_on": sorted(declared)})
    return nodes, valid and not _has_cycle(edges)


def _has_cycle(edges: dict[str, set[str]]) -> bool:
    state: dict[str, int] = {}

    def visit(node: str) -> bool:
        if state.get(node) == 1:
            return True
        if state.get(node) == 2:
            return False
        state[node] = 1
        found = any(visit(d) for d in edges.get(node, ()) if d in edges)
        state[node] = 2
        return found

    return any(visit(n) for n in edges)


@given(random_dags())
def test_random_dags_are_accepted_iff_acyclic_and_resolved(
    case: tuple[list[dict[str, object]], bool],
) -> None:
    nodes, acceptable = case
    try:
        dag = SqlDag(nodes)
    except SqlDagError as exc:
        assert not acceptable, f"refused a valid DAG: {exc}"
        return
    assert acceptable, "accepted an invalid DAG"
    position = {name: i for i, name in enumerate(dag.order)}
    for node in dag.nodes.values():
        assert all(position[d] < position[node.name] for d in node.depends_on)
    runner = DagRunner(dag)
    runner.run(pa.record_batch([pa.array([1])], names=["x"]))
    assert runner.runs == dict.fromkeys(dag.order, 1)
