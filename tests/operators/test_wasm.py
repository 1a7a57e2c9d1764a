"""``twg.wasm_map`` and ``twg.wasm_sql`` in a dataflow: failures go to the DLQ, never stop it."""

from __future__ import annotations

import bytewax.operators as op
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bytewax.dataflow import Stream
from bytewax.operators import KeyedStream

import thalweg_bytewax.operators as twg
from tests.helpers import run_flow
from tests.udf.wat import DIVIDE_100_BY_X, EXAMPLE, GROW_FOREVER, LOOP_FOREVER, wat_module
from thalweg_bytewax.coverage.input_span import input_span
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes.dlq import DLQ_MESSAGE, DLQ_REASON, DLQ_STEP_ID, dlq_schema
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS as C
from thalweg_bytewax.udf import WasmFunction


def part(partition: int, first: int, values: list[int | None]) -> tuple[str, pa.RecordBatch]:
    n = len(values)
    batch = pa.RecordBatch.from_pydict(
        {
            C.source_topic: ["readings"] * n,
            C.source_partition: pa.array([partition] * n, pa.int32()),
            C.source_offset: pa.array(range(first, first + n), pa.int64()),
            "x": pa.array(values, pa.int64()),
            "celsius": pa.array([None if v is None else float(v) for v in values]),
        }
    )
    return f"readings:{partition}", batch


def batches(stream: Stream[tuple[str, pa.RecordBatch]]) -> KeyedStream[pa.RecordBatch]:
    k = op.key_on("key", stream, lambda kv: kv[0])
    return op.map_value("batch", k, lambda kv: kv[1])


def test_wasm_map_appends_the_result_column_keyed_like_the_input() -> None:
    c2f = WasmFunction(EXAMPLE, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    items = [part(0, 0, [0, 100, None]), part(1, 10, [-40])]
    got = run_flow(
        items,
        lambda s: twg.wasm_map("to_f", batches(s), c2f, args=["celsius"], output="fahrenheit"),
        flow_id="wasm_map_ok",
    )
    assert got["rejected"] == []
    assert [(k, b.column("fahrenheit").to_pylist()) for k, b in got["ok"]] == [
        ("readings:0", [32.0, 212.0, None]),
        ("readings:1", [-40.0]),
    ]


def test_an_empty_batch_emits_nothing_on_either_stream() -> None:
    c2f = WasmFunction(EXAMPLE, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    got = run_flow(
        [part(0, 0, []), part(1, 0, [100])],
        lambda s: twg.wasm_map("to_f", batches(s), c2f, args=["celsius"], output="fahrenheit"),
        flow_id="wasm_map_empty",
    )
    assert got["rejected"] == []
    assert [(k, b.column("fahrenheit").to_pylist()) for k, b in got["ok"]] == [
        ("readings:1", [212.0]),
    ]


@pytest.mark.parametrize(
    ("body", "reason_text"),
    [
        (DIVIDE_100_BY_X, "trapped: wasm trap: integer divide by zero"),
        (LOOP_FOREVER, "ran out of fuel"),
        (GROW_FOREVER, "cap of 8388608"),
    ],
    ids=["trap", "fuel", "memory"],
)
def test_failing_rows_go_to_the_dlq_with_reason_udf_and_the_flow_goes_on(
    body: str, reason_text: str
) -> None:
    f = WasmFunction(
        wat_module(body),
        "f",
        args=["int64"],
        returns="int64",
        memory_limit_bytes=8 << 20,
        chunk_rows=1024,
    )
    hostile_everywhere = body is not DIVIDE_100_BY_X
    items = [part(0, 0, [5, 0, 4]), part(0, 3, [2, 1]), part(1, 0, [0])]
    got = run_flow(
        items,
        lambda s: twg.wasm_map("divide", batches(s), f, args=["x"], output="y"),
        flow_id="wasm_map_failing",
    )
    rejected = pa.Table.from_batches([b for _, b in got["rejected"]])
    assert rejected.schema.equals(dlq_schema())
    assert set(rejected.column(DLQ_REASON).to_pylist()) == {"udf"}
    assert set(rejected.column(DLQ_STEP_ID).to_pylist()) == {"wasm_map_failing.divide"}
    assert all(reason_text in m for m in rejected.column(DLQ_MESSAGE).to_pylist())
    located = sorted(
        zip(
            rejected.column(C.source_partition).to_pylist(),
            rejected.column(C.source_offset).to_pylist(),
            strict=True,
        )
    )
    if hostile_everywhere:  # every row fails, each batch is still only its own
        assert located == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)]
        assert got["ok"] == []
        return
    assert located == [(0, 1), (1, 0)]  # only the rows that trap
    ok = {(k, tuple(b.column(C.source_offset).to_pylist())): b for k, b in got["ok"]}
    assert set(ok) == {("readings:0", (0, 2)), ("readings:0", (3, 4))}
    first = ok[("readings:0", (0, 2))]
    assert first.column("y").to_pylist() == [20, 25]
    # The kept rows stand for their whole input, so a sink covers the rejected offset.
    assert input_span(first) == ("readings:0", 0, 2)


def test_wasm_map_is_refused_at_build_for_a_wrong_number_of_columns() -> None:
    c2f = WasmFunction(EXAMPLE, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    with pytest.raises(ConfigError, match=r"wasm_map `wasm_map_refused.to_f`: expected 1 argument"):
        run_flow(
            [part(0, 0, [1])],
            lambda s: twg.wasm_map("to_f", batches(s), c2f, args=["celsius", "x"], output="f"),
            flow_id="wasm_map_refused",
        )


def test_wasm_sql_runs_the_query_and_rejects_a_failing_batch_whole() -> None:
    hundred_by = WasmFunction(
        wat_module(DIVIDE_100_BY_X), "f", args=["int64"], returns="int64", name="hundred_by"
    )
    c2f = WasmFunction(
        EXAMPLE, "celsius_to_fahrenheit", args=["float64"], returns="float64", name="c2f"
    )
    items = [part(0, 0, [5, 4]), part(0, 2, [1, 0, 2]), part(1, 0, [50])]
    got = run_flow(
        items,
        lambda s: twg.wasm_sql(
            "enrich",
            batches(s),
            "SELECT x, hundred_by(x) AS h, c2f(celsius) AS f FROM input",
            functions=[hundred_by, c2f],
        ),
        flow_id="wasm_sql_flow",
    )
    ok = sorted(
        (k, b.column(C.source_offset).to_pylist(), b.column("h").to_pylist()) for k, b in got["ok"]
    )
    assert ok == [("readings:0", [0, 1], [20, 25]), ("readings:1", [0], [2])]
    assert got["ok"][0][1].column("f").equals(pc.add(pc.multiply(pa.array([5.0, 4.0]), 1.8), 32.0))
    [(key, rejected)] = got["rejected"]
    assert key == "readings:0"
    assert rejected.column(C.source_offset).to_pylist() == [2, 3, 4]
    assert set(rejected.column(DLQ_REASON).to_pylist()) == {"udf"}
    message = rejected.column(DLQ_MESSAGE)[0].as_py()
    assert "wasm udf `hundred_by`" in message and "integer divide by zero" in message
    assert message.endswith("the batch of 3 rows is rejected whole")
