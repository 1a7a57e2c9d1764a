"""``twg.sql`` in a dataflow: output keyed like the input, refusals at build time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS as C
from thalweg_bytewax.sql.bounds import SqlTimeoutError


def part(topic: str, partition: int, first: int, items: list[list[int]]) -> pa.RecordBatch:
    n = len(items)
    return pa.RecordBatch.from_pydict(
        {
            C.source_topic: [topic] * n,
            C.source_partition: pa.array([partition] * n, pa.int32()),
            C.source_offset: pa.array(range(first, first + n), pa.int64()),
            "items": items,
        }
    )


def test_output_is_keyed_like_the_input_and_empty_results_are_dropped() -> None:
    inp = [
        ("orders:0", part("orders", 0, 0, [[1, 2], [3]])),
        ("orders:1", part("orders", 1, 5, [[], []])),
        ("orders:1", part("orders", 1, 7, [[4]])),
    ]
    out: list[tuple[str, pa.RecordBatch]] = []
    flow = Dataflow("sql_keyed")
    s = op.input("inp", flow, TestingSource(inp))
    keyed = op.key_on("key", s, lambda kv: kv[0])
    batches = op.map_value("batch", keyed, lambda kv: kv[1])
    query = "SELECT u.item FROM input, unnest(items) AS u(item) WHERE u.item > $m"
    items = twg.sql("items", batches, query, params={"m": 0})
    op.output("out", items, TestingSink(out))
    run_main(flow)
    got = sorted(
        (k, o, item)
        for k, b in out
        for o, item in zip(
            b.column(C.source_offset).to_pylist(), b.column("item").to_pylist(), strict=True
        )
    )
    assert got == [("orders:0", 0, 1), ("orders:0", 0, 2), ("orders:0", 1, 3), ("orders:1", 7, 4)]
    assert len(out) == 2  # the batch of orders:1 with no items emitted nothing


def test_a_refused_query_fails_the_build_naming_the_step() -> None:
    flow = Dataflow("sql_refused")
    s = op.input("inp", flow, TestingSource([("orders:0", part("orders", 0, 0, [[1]]))]))
    keyed = op.key_on("key", s, lambda kv: kv[0])
    batches = op.map_value("batch", keyed, lambda kv: kv[1])
    with pytest.raises(ConfigError, match=r"sql `sql_refused.peek`: expected"):
        twg.sql("peek", batches, "SELECT * FROM read_csv('/etc/passwd')")


SLOW = "SELECT count(*) AS n FROM input, range(100000000) AS r(i) WHERE i % 7 = len(items)"


def _one_batch(name: str) -> tuple[Dataflow, op.KeyedStream[pa.RecordBatch]]:
    flow = Dataflow(name)
    s = op.input("inp", flow, TestingSource([("orders:0", part("orders", 0, 0, [[1]]))]))
    keyed = op.key_on("key", s, lambda kv: kv[0])
    return flow, op.map_value("batch", keyed, lambda kv: kv[1])


@pytest.mark.parametrize(
    "bound",
    [{"timeout": timedelta(seconds=0.2)}, {"timeout_seconds": 0.2}],
    ids=["timeout", "old-timeout_seconds"],
)
def test_the_timeout_is_a_timedelta_and_the_old_seconds_keyword_warns_and_bounds_alike(
    bound: dict[str, Any],
) -> None:
    flow, batches = _one_batch("sql_bounded")
    if "timeout_seconds" in bound:
        with pytest.warns(
            DeprecationWarning, match="`timeout_seconds` is deprecated; pass `timeout"
        ):
            out = twg.sql("slow", batches, SLOW, **bound)
    else:
        out = twg.sql("slow", batches, SLOW, **bound)
    op.output("out", out, TestingSink([]))
    with pytest.raises(Exception, match=r"sql_bounded\.slow") as caught:
        run_main(flow)
    causes = []
    cause: BaseException | None = caught.value
    while cause is not None:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(c, SqlTimeoutError) for c in causes), causes


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout": 5}, r"`timeout` expected a positive datetime.timedelta or None; got 5"),
        ({"timeout": timedelta(0)}, r"`timeout` expected a positive datetime.timedelta"),
    ],
)
def test_a_timeout_that_is_no_positive_timedelta_is_refused_naming_it(
    kwargs: dict[str, Any], match: str
) -> None:
    _, batches = _one_batch("sql_bad_timeout")
    with pytest.raises(ConfigError, match=match):
        twg.sql("q", batches, "SELECT * FROM input", **kwargs)


def test_the_timeout_and_its_old_name_together_are_refused() -> None:
    _, batches = _one_batch("sql_both")
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ConfigError, match="got `timeout` and its old name `timeout_seconds`"),
    ):
        twg.sql("q", batches, "SELECT * FROM input", timeout=timedelta(1), timeout_seconds=1.0)
