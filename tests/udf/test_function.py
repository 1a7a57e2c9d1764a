"""A WASM function over Arrow columns: the ABI, fuel per row, the memory cap, failures."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from thalweg_bytewax.udf import UdfFailure, WasmFunction, WasmModule, WasmUdfError

from .wat import (
    ALLOC,
    CALLS_SO_FAR,
    DIVIDE_100_BY_X,
    EXAMPLE,
    GROW_FOREVER,
    LOOP_FOREVER,
    SPIN_X_TIMES,
    STATUS_7,
    UNARY,
    wat_module,
)


@pytest.fixture(scope="module")
def example() -> WasmModule:
    return WasmModule.from_file(EXAMPLE)


def hostile(
    body: str,
    *,
    chunk_rows: int = 1024,
    fuel_per_row: int = 1_000,
    fuel_per_call: int = 100_000,
    max_bisect_calls: int = 64,
) -> WasmFunction:
    return WasmFunction(
        wat_module(body),
        "f",
        args=["int64"],
        returns="int64",
        memory_limit_bytes=8 << 20,
        chunk_rows=chunk_rows,
        fuel_per_row=fuel_per_row,
        fuel_per_call=fuel_per_call,
        max_bisect_calls=max_bisect_calls,
    )


def test_float64_in_and_out_with_nulls_slices_and_chunks(example: WasmModule) -> None:
    c2f = WasmFunction(
        example, "celsius_to_fahrenheit", args=["float64"], returns="float64", chunk_rows=3
    )
    x = pa.array([0.0, 100.0, None, -40.0, 37.5, None, 1e300, -0.0])
    expected = pc.add(pc.multiply(x, 1.8), 32.0)
    assert c2f(x).equals(expected)
    assert c2f(x.slice(3)).equals(expected.slice(3))  # a sliced array's offset is honoured
    chunked = pa.chunked_array([x.slice(0, 5), x.slice(5)])
    assert c2f(chunked).equals(expected)
    assert len(c2f(pa.array([], pa.float64()))) == 0


def test_int64_module_makes_rows_null_through_the_output_validity(example: WasmModule) -> None:
    div = WasmFunction(example, "safe_div", args=["int64", "int64"], returns="int64", chunk_rows=5)
    a = pa.array([10, 7, None, 5, -9, 1, 2, 3, 4, 5, 6, 7], pa.int64())
    b = pa.array([2, 0, 1, None, 2, 1, 1, 1, 1, 0, 1, 1], pa.int64())
    # Null where either argument is null (the AND the host passes in) or b is 0 (the module).
    assert div(a, b).to_pylist() == [5, None, None, None, -4, 1, 2, 3, 4, None, 6, 7]
    # An int32 column is cast to the declared int64, safely.
    assert div(pa.array([9], pa.int32()), pa.array([3], pa.int32())).to_pylist() == [3]


def test_utf8_arguments_cross_as_offsets_and_data(example: WasmModule) -> None:
    chars = WasmFunction(example, "utf8_chars", args=["utf8"], returns="int64", chunk_rows=2)
    s = pa.array(["pre", "héllo", None, "", "日本語", "x" * 1000])
    assert chars(s.slice(1)).to_pylist() == [5, None, 0, 3, 1000]
    assert chars(s.slice(1)).equals(pc.utf8_length(s.slice(1)).cast(pa.int64()))


def test_a_million_rows_match_pyarrow_compute(example: WasmModule) -> None:
    c2f = WasmFunction(example, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    x = pa.array(np.random.default_rng(7).normal(15, 10, 1_000_000))
    assert c2f(x).equals(pc.add(pc.multiply(x, 1.8), 32.0))


def test_a_function_that_never_ends_is_stopped_by_fuel() -> None:
    f = hostile(LOOP_FOREVER, max_bisect_calls=0)
    with pytest.raises(WasmUdfError) as caught:
        f(pa.array([1, 2, 3]))
    assert caught.value.kind is UdfFailure.FUEL
    text = str(caught.value)
    assert "ran out of fuel (103000 units for 3 row(s)) on rows 0-2 of its input" in text
    assert "raise `fuel_per_row`" in str(caught.value)


def test_fuel_is_per_row_so_a_costly_row_fails_alone() -> None:
    # Each row spins its value times (~5 units a turn): 100 turns fit 1,000 fuel a row.
    f = hostile(SPIN_X_TIMES, fuel_per_row=1_000, fuel_per_call=1_000)
    cheap = pa.array([100] * 1000, pa.int64())
    assert f.apply([cheap]).failures == ()  # 100,000 turns in one call: fuel grows with rows
    costly = pa.array([100] * 500 + [10**9] + [100] * 499, pa.int64())
    result = f.apply([costly])
    assert [(x.start, x.stop, x.error.kind) for x in result.failures] == [
        (500, 501, UdfFailure.FUEL)
    ]
    assert result.ok is not None and len(result.ok) == 999 and 500 not in result.ok


def test_a_function_that_allocates_without_bound_is_stopped_by_the_memory_cap() -> None:
    f = hostile(GROW_FOREVER, max_bisect_calls=0)
    with pytest.raises(WasmUdfError) as caught:
        f(pa.array([1]))
    assert caught.value.kind is UdfFailure.MEMORY
    assert "cap of 8388608" in str(caught.value)
    assert "raise `memory_limit_bytes`" in str(caught.value)


def test_an_allocator_that_cannot_grow_fails_the_chunk_as_memory() -> None:
    # twg_alloc returns 0 when the cap refuses a grow: 16 strings of 200 kB do not fit
    # in 1 MiB, each alone does.
    utf8 = "(param i32 i32 i32 i32 i32 i32) (result i32)"
    f = WasmFunction(
        wat_module(f'(func (export "f") {utf8} (i32.const 0))'),
        "f",
        args=["utf8"],
        returns="int64",
        memory_limit_bytes=1 << 20,
        chunk_rows=16,
    )
    text = pa.array(["x" * 200_000] * 16)
    with pytest.raises(WasmUdfError) as caught:
        f(text)
    assert caught.value.kind is UdfFailure.MEMORY
    # The chunk's buffers: offsets (72), data (3,200,000), values (128), validity (8).
    assert "could not allocate 3200208 bytes within the memory cap of 1048576 bytes" in str(
        caught.value
    )
    assert f.apply([text]).failures == ()  # bisected down to chunks that fit


def test_a_trap_fails_only_the_rows_that_trap() -> None:
    f = hostile(DIVIDE_100_BY_X)
    x = pa.array([5, 4, 0, 2] * 10, pa.int64())
    result = f.apply([x])
    assert [(r.start, r.stop) for r in result.failures] == [(i, i + 1) for i in range(2, 40, 4)]
    assert {r.error.kind for r in result.failures} == {UdfFailure.TRAP}
    first = str(result.failures[0].error)
    assert "trapped: wasm trap: integer divide by zero on row 2 of its input" in first
    assert result.values.to_pylist() == [20, 25, 50] * 10
    assert result.ok is not None
    assert result.ok.tolist() == [i for i in range(40) if i % 4 != 2]


def test_bisection_stops_at_its_budget_and_reports_the_rest_whole() -> None:
    f = hostile(STATUS_7, max_bisect_calls=4)
    result = f.apply([pa.array(range(100), pa.int64())])
    # 4 extra calls: 100 -> 50 + 50 -> (25 + 25) + 50; every range fails with status 7.
    assert [(r.start, r.stop) for r in result.failures] == [(0, 25), (25, 50), (50, 100)]
    assert {r.error.kind for r in result.failures} == {UdfFailure.STATUS}
    assert "returned status 7; expected 0" in str(result.failures[0].error)
    assert len(result.values) == 0 and result.ok is not None and len(result.ok) == 0


def test_each_call_runs_in_a_fresh_instance() -> None:
    f = hostile(CALLS_SO_FAR, chunk_rows=10)
    assert f(pa.array(range(35), pa.int64())).to_pylist() == [1] * 35


def test_a_pointer_outside_memory_is_never_written() -> None:
    rogue = '(memory (export "memory") 1) (func (export "twg_alloc") (param i32) (result i32) (i32.const 65530))'
    f = WasmFunction(
        wat_module(f'(func (export "f") {UNARY} (i32.const 0))', alloc=rogue),
        "f",
        args=["int64"],
        returns="int64",
        memory_limit_bytes=1 << 20,
        chunk_rows=16,
    )
    with pytest.raises(WasmUdfError) as caught:
        f(pa.array([1, 2], pa.int64()))
    assert caught.value.kind is UdfFailure.ABI
    assert "`twg_alloc(40)` returned 65530, outside its memory of 65536 bytes" in str(caught.value)


def test_the_sandbox_error_pickles_with_its_kind() -> None:
    err = WasmUdfError("wasm udf `f`: ran out of fuel", UdfFailure.FUEL)
    back = pickle.loads(pickle.dumps(err))
    assert back.kind is UdfFailure.FUEL and str(back) == str(err)


def test_bounds_must_be_positive(example: WasmModule) -> None:
    with pytest.raises(ValueError, match=r"expected a positive integer `fuel_per_row`; got 0"):
        WasmFunction(
            example, "celsius_to_fahrenheit", args=["float64"], returns="float64", fuel_per_row=0
        )
    with pytest.raises(ValueError, match=r"expected 1 argument column\(s\); got 2"):
        WasmFunction(example, "celsius_to_fahrenheit", args=["float64"], returns="float64")(
            pa.array([1.0]), pa.array([2.0])
        )
    assert ALLOC  # the allocator the hostile modules share
