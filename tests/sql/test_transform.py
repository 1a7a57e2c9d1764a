"""Transform SQL: the sandbox refuses each way out, the shipped functions, lineage per shape."""

from __future__ import annotations

import base64
import pickle
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql._functions import FUNCTION_NAMES
from thalweg_bytewax.sql.engine import SqlSession
from thalweg_bytewax.sql.lineage import derived_ordinals
from thalweg_bytewax.sql.node import SqlNode, SqlNodeError

REFUSED = {
    "read_csv": "SELECT * FROM read_csv('/etc/passwd')",
    "read_parquet": "SELECT * FROM read_parquet('/etc/passwd')",
    "file_literal": "SELECT * FROM '/etc/passwd'",
    "read_text": "SELECT * FROM read_text('/etc/hostname')",
    "http": "SELECT * FROM read_csv('https://example.com/x.csv')",
    "http_literal": "SELECT * FROM 'https://example.com/x.parquet'",
    "copy": "COPY (SELECT 1) TO '/tmp/twg-out.csv'",
    "attach": "ATTACH '/tmp/twg.db' AS other",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set": "SET enable_external_access = true",
    "pragma": "PRAGMA enable_profiling",
    "settings": "SELECT * FROM duckdb_settings()",
    "other_db": "SELECT * FROM other.main.t",
    "two_statements": "SELECT * FROM input; SELECT 1",
    "create": "CREATE TABLE t AS SELECT * FROM input",
    # A CTE's name is bound only in its own scope: one named for a catalog view inside
    # a subquery leaves the outer read of that view a read of the catalog.
    "cte_out_of_scope": (
        "SELECT * FROM (WITH duckdb_settings AS (SELECT 1 AS x) SELECT x FROM "
        "duckdb_settings) AS s, duckdb_settings"
    ),
    "cte_in_expression_subquery": (
        "SELECT a, (WITH duckdb_tables AS (SELECT 1 AS n) SELECT n FROM duckdb_tables), "
        "(SELECT count(*) FROM duckdb_tables) FROM input"
    ),
    "cte_body_reads_later_sibling": (
        "WITH a AS (SELECT * FROM duckdb_settings), duckdb_settings AS (SELECT 1 AS x) "
        "SELECT * FROM a"
    ),
    "cte_body_reads_itself": (
        "WITH duckdb_settings AS (SELECT * FROM duckdb_settings) SELECT * FROM duckdb_settings"
    ),
    "show_subquery": "SELECT * FROM (SHOW TABLES)",
    "show_all_subquery": "SELECT * FROM input, (SHOW ALL TABLES)",
    "describe_subquery": "SELECT * FROM (DESCRIBE input)",
    "summarize_in_cte": "WITH s AS (SUMMARIZE input) SELECT * FROM s",
    "show_in_expression": "SELECT a, (SELECT count(*) FROM (SHOW TABLES)) AS n FROM input",
}


def batch(n: int = 4) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            C.source_topic: ["t"] * n,
            C.source_partition: pa.array([3] * n, pa.int32()),
            C.source_offset: pa.array(range(10, 10 + n), pa.int64()),
            C.record_id: pa.array([bytes([i]) * 16 for i in range(n)], pa.binary(16)),
            "a": list(range(1, n + 1)),
            "k": ["x", "y"] * (n // 2),
            "items": [[1, 2], [], [3], [4, 5, 6]][:n],
        }
    )


@pytest.mark.parametrize("query", REFUSED.values(), ids=REFUSED.keys())
def test_each_way_out_is_refused_at_build_naming_the_node(query: str) -> None:
    with pytest.raises(ConfigError, match=r"^sql `enrich_orders`: expected"):
        SqlNode("enrich_orders", query)


# Neighbours of the refused CTE shapes that read only the batch: each builds and runs.
SCOPED_CTES = {
    "sibling_reads_earlier": (
        "WITH x AS (SELECT * FROM input), y AS (SELECT * FROM x WHERE a > 1) SELECT * FROM y"
    ),
    "subquery_reads_outer_cte": (
        "WITH x AS (SELECT * FROM input) SELECT * FROM (SELECT * FROM x WHERE a > 1) AS s"
    ),
    "expression_reads_outer_cte": (
        "WITH m AS (SELECT min(a) AS low FROM input) "
        "SELECT * FROM input WHERE a > (SELECT low FROM m)"
    ),
    "nested_with": (
        "SELECT * FROM (WITH x AS (SELECT * FROM input) SELECT * FROM x) AS s WHERE a > 1"
    ),
    "recursive": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
        "SELECT input.* FROM input, r WHERE a > 1 AND r.n = 1"
    ),
    "union_under_with": (
        "WITH x AS (SELECT * FROM input) SELECT * FROM x WHERE a > 2 "
        "UNION ALL SELECT * FROM x WHERE a = 2"
    ),
}


@pytest.mark.parametrize("query", SCOPED_CTES.values(), ids=SCOPED_CTES.keys())
def test_ctes_in_scope_are_read_as_ctes(query: str) -> None:
    out = SqlNode("scoped", query).run(batch())
    assert sorted(out.column("a").to_pylist()) == [2, 3, 4]


def test_runtime_wall_refuses_file_access_even_past_the_check(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    # The second wall: a session refuses files and settings even to SQL never checked.
    session = SqlSession(5)
    cur = session.cursor()
    with pytest.raises(Exception, match="disabled by configuration"):
        cur.sql(f"SELECT * FROM read_csv('{secret}')").fetchall()
    with pytest.raises(Exception, match="(?i)lock"):
        cur.execute("SET enable_external_access = true")


def test_a_run_time_failure_names_the_node() -> None:
    node = SqlNode("cast_step", "SELECT CAST(k AS INTEGER) AS n FROM input")
    with pytest.raises(SqlNodeError, match=r"^sql `cast_step`: expected the query to run"):
        node.run(batch())
    err = SqlNodeError("sql `x`: boom")
    assert str(pickle.loads(pickle.dumps(err))) == "sql `x`: boom"


def test_params_must_match_the_query() -> None:
    node = SqlNode("p", "SELECT a FROM input WHERE a > $min", params={"min": 2})
    assert node.run(batch()).column("a").to_pylist() == [3, 4]
    with pytest.raises(ConfigError, match=r"sql `p`: expected `params`"):
        SqlNode("p", "SELECT a FROM input WHERE a > $min")
    with pytest.raises(ConfigError, match=r"sql `p`: expected `name`"):
        SqlNode("p", "SELECT 1", name="a b")


def test_filter_and_projection_keep_each_rows_locator() -> None:
    out = SqlNode("f", "SELECT a * 10 AS b FROM input WHERE a % 2 = 0").run(batch())
    assert out.column("b").to_pylist() == [20, 40]
    assert out.column(C.source_offset).to_pylist() == [11, 13]
    assert out.column(C.record_id).to_pylist() == [b"\x01" * 16, b"\x03" * 16]
    assert out.schema.field(C.source_partition).type == pa.int32()
    assert "__twg_row" not in out.schema.names
    star = SqlNode("s", "SELECT * FROM input").run(batch())
    assert star.schema.names == batch().schema.names


def test_unnest_rows_keep_their_parents_locator_with_an_ordinal() -> None:
    out = SqlNode("u", "SELECT a, unnest(items) AS item FROM input").run(batch())
    assert out.column("item").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert out.column(C.source_offset).to_pylist() == [10, 10, 12, 13, 13, 13]
    assert out.column("_twg_derived_ordinal").to_pylist() == [0, 1, 0, 0, 1, 2]
    lateral = SqlNode("l", "SELECT i.a, u.x FROM input AS i, unnest(i.items) AS u(x)")
    assert lateral.run(batch()).column(C.source_offset).to_pylist() == [10, 10, 12, 13, 13, 13]


def test_aggregates_keep_their_contributors() -> None:
    out = SqlNode("g", "SELECT k, count(*) AS n FROM input GROUP BY k ORDER BY k").run(batch())
    assert out.column("n").to_pylist() == [2, 2]
    assert out.column(C.source_offset).to_pylist() == [12, 13]
    assert out.column("_twg_contributor_offsets").to_pylist() == [[10, 12], [11, 13]]
    assert out.column(C.record_id).null_count == 2
    empty = SqlNode("e", "SELECT count(*) AS n FROM input WHERE a > 100").run(batch())
    assert empty.num_rows == 0


def test_a_query_that_drops_the_locator_is_refused_naming_the_node() -> None:
    node = SqlNode("cte", "WITH x AS (SELECT a FROM input) SELECT a FROM x")
    with pytest.raises(ConfigError, match=r"^sql `cte`: expected the output to keep"):
        node.run(batch())
    union = SqlNode(
        "u",
        f"SELECT a, {C.source_topic}, {C.source_partition}, {C.source_offset} FROM input "
        f"UNION ALL SELECT a, {C.source_topic}, {C.source_partition}, {C.source_offset} "
        "FROM input",
    )
    assert union.run(batch()).num_rows == 8


def test_shipped_functions() -> None:
    assert set(FUNCTION_NAMES) == {
        "millis_to_ts_utc",
        "millis_to_ts_ntz",
        "decode_avro_decimal",
        "header",
    }
    cents = (-12345).to_bytes(3, "big", signed=True)
    data = pa.RecordBatch.from_pydict(
        {
            "ms": pa.array([1_700_000_000_123], pa.int64()),
            "dec": pa.array([cents], pa.binary()),
            "dec64": [base64.b64encode(cents).decode()],
            "h": pa.array(
                [[{"key": "trace", "value": b"a"}, {"key": "trace", "value": b"b"}]],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
            "s": pa.array(
                [{"x": 1, "y": [1.5]}],
                pa.struct([("x", pa.int64()), ("y", pa.list_(pa.float64()))]),
            ),
        }
    )
    out = SqlNode(
        "fn",
        "SELECT millis_to_ts_utc(ms) AS u, millis_to_ts_ntz(ms) AS z, "
        "CAST(decode_avro_decimal(dec, 2) AS DECIMAL(10, 2)) AS d, "
        "CAST(decode_avro_decimal(dec64, 2) AS DECIMAL(10, 2)) AS d64, "
        "header(h, 'trace') AS t, header(h, 'none') AS t0, to_json(s) AS j FROM input",
    ).run(data)
    assert out.schema.field("u").type == pa.timestamp("us", tz="UTC")
    assert out.schema.field("z").type == pa.timestamp("us")
    row = out.to_pylist()[0]
    assert row["u"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert row["z"] == datetime(2023, 11, 14, 22, 13, 20, 123000)  # noqa: DTZ001
    assert row["d"] == row["d64"] == Decimal("-123.45")
    assert (row["t"], row["t0"]) == (b"b", None)
    assert row["j"] == '{"x":1,"y":[1.5]}'


@given(st.integers(min_value=-(10**20) + 1, max_value=10**20 - 1), st.integers(0, 18))
def test_decode_avro_decimal_round_trips(unscaled: int, scale: int) -> None:
    width = max(1, (unscaled.bit_length() + 8) // 8)
    raw = unscaled.to_bytes(width, "big", signed=True)
    session = SqlSession(5)
    got = (
        session.query(
            {"t": pa.table({"b": pa.array([raw], pa.binary())})},
            f"SELECT decode_avro_decimal(b, {scale}) AS d FROM t",
        )
        .column("d")[0]
        .as_py()
    )
    assert got == Decimal(unscaled).scaleb(-scale)


@given(st.lists(st.integers(0, 5), max_size=40))
def test_derived_ordinals_number_each_parents_rows(parents: list[int]) -> None:
    got = derived_ordinals(pa.array(parents, pa.int64())).to_pylist()
    seen: dict[int, int] = {}
    want = []
    for p in parents:
        want.append(seen.get(p, 0))
        seen[p] = seen.get(p, 0) + 1
    assert got == want
