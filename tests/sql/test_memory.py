"""User SQL is bounded in memory: every session caps DuckDB, and a query past it fails loudly."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql.bounds import SqlMemoryError
from thalweg_bytewax.sql.dag import SqlDag
from thalweg_bytewax.sql.dag_runner import DagRunner, SqlDagRunError
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.node import SqlNode, transform_session

MiB = 1024 * 1024

# Nine million distinct values over a three-row batch: a hash table of a few hundred MiB
# built in well under a second, so only a memory limit stops it (never the time bound).
GREEDY = (
    "SELECT a, count(DISTINCT a * 10000000 + i) AS n FROM input, range(3000000) AS t(i) GROUP BY a"
)


def batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            C.source_topic: ["t"] * 3,
            C.source_partition: pa.array([0] * 3, pa.int32()),
            C.source_offset: pa.array([10, 11, 12], pa.int64()),
            "a": [1, 2, 3],
        }
    )


def _settings(session: SqlSession) -> tuple[str, str]:
    sql = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    ((limit, temp),) = session.cursor().execute(sql).fetchall()
    return limit, temp


def test_every_session_caps_duckdb_memory_without_spilling_and_locks_it() -> None:
    # DuckDB's own default is 80 % of the machine's RAM per database, spilling to `.tmp`.
    assert _settings(SqlSession(5)) == ("256.0 MiB", "")
    assert _settings(SqlSession(5, memory_limit_bytes=64 * MiB)) == ("64.0 MiB", "")
    assert _settings(transform_session()) == ("1.0 GiB", "")
    session = SqlSession(5, memory_limit_bytes=32 * MiB)
    with pytest.raises(Exception, match="(?i)lock"):
        session.cursor().execute("SET memory_limit = '8GB'")
    again = pickle.loads(pickle.dumps(session))
    assert again.memory_limit_bytes == 32 * MiB and _settings(again)[0] == "32.0 MiB"


def test_a_node_past_its_memory_limit_fails_naming_the_node_the_limit_and_the_remedy() -> None:
    node = SqlNode("greedy_node", GREEDY, memory_limit_bytes=32 * MiB)
    with pytest.raises(SqlMemoryError) as info:
        node.run(batch())
    msg = str(info.value)
    assert msg.startswith(
        "sql `greedy_node`: expected the query to fit in the memory limit of 32 MiB; "
        "got Out of Memory Error"
    ), msg
    assert "raise `memory_limit_bytes` (`[sql] memory_limit_mb` in a pipeline file)" in msg
    assert str(pickle.loads(pickle.dumps(info.value))) == msg
    # The database lives on: the next query of the same limit runs.
    small = SqlNode("small", "SELECT a FROM input WHERE a > 1", memory_limit_bytes=32 * MiB)
    assert small.run(batch()).column("a").to_pylist() == [2, 3]


def test_a_dag_node_past_the_limit_fails_the_batch_naming_the_node() -> None:
    dag = SqlDag(
        [
            {"name": "kept", "query": "SELECT * FROM input"},
            {"name": "greedy", "query": GREEDY.replace("FROM input", "FROM kept")}
            | {"depends_on": ["kept"]},
            {
                "name": "joined",
                "query": (
                    "SELECT k.a, count(DISTINCT k.a * 10000000 + i) AS n "
                    "FROM kept AS k JOIN input AS x USING (a), range(3000000) AS t(i) "
                    "GROUP BY k.a"
                ),
                "depends_on": ["kept"],
            },
        ]
    )
    runner = DagRunner(dag, memory_limit_bytes=32 * MiB)
    with pytest.raises(SqlDagRunError) as info:
        runner.run(batch())
    msg = str(info.value)
    assert msg.startswith("sql dag node `greedy`: the query failed on a batch: sql `greedy`: ")
    assert "memory limit of 32 MiB" in msg and "raise `memory_limit_bytes`" in msg
    # A node reading two relations runs as written on the same database, as bounded.
    alone = SqlDag([dag.nodes["kept"], dag.nodes["joined"]])
    with pytest.raises(SqlDagRunError, match=r"node `joined`: .*memory limit of 32 MiB"):
        DagRunner(alone, memory_limit_bytes=32 * MiB).run(batch())


@pytest.mark.parametrize("limit", [0, MiB, 16 * MiB - 1, 2.5e9, True, "1GB"])
def test_the_memory_limit_is_checked_at_build(limit: object) -> None:
    with pytest.raises(ConfigError, match=r"^sql `n`: expected `memory_limit_bytes`"):
        SqlNode("n", "SELECT a FROM input", memory_limit_bytes=limit)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^sql session: expected `memory_limit_bytes`"):
        SqlSession(1, memory_limit_bytes=limit)  # type: ignore[arg-type]
