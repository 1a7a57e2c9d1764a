"""Loading a WASM module: bounded, importing nothing, the ABI exports, compiled once."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
import wasmtime

from thalweg_bytewax.errors import MissingDependencyError
from thalweg_bytewax.udf import WasmFunction, WasmModule, WasmModuleError
from thalweg_bytewax.udf.module import _compiled

from .wat import ALLOC, EXAMPLE, UNARY, wat_module

# Every way out of a sandbox a module could ask for: WASI files, sockets, environment,
# clocks and randomness, and host functions, memories and tables of any module name.
HOST_IMPORTS = [
    (
        "wasi_snapshot_preview1",
        "path_open",
        "(func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32))",
    ),
    ("wasi_snapshot_preview1", "fd_write", "(func (param i32 i32 i32 i32) (result i32))"),
    ("wasi_snapshot_preview1", "fd_read", "(func (param i32 i32 i32 i32) (result i32))"),
    ("wasi_snapshot_preview1", "sock_accept", "(func (param i32 i32 i32) (result i32))"),
    ("wasi_snapshot_preview1", "sock_send", "(func (param i32 i32 i32 i32 i32) (result i32))"),
    ("wasi_snapshot_preview1", "environ_get", "(func (param i32 i32) (result i32))"),
    ("wasi_snapshot_preview1", "clock_time_get", "(func (param i32 i64 i32) (result i32))"),
    ("wasi_snapshot_preview1", "random_get", "(func (param i32 i32) (result i32))"),
    ("wasi_unstable", "fd_write", "(func (param i32 i32 i32 i32) (result i32))"),
    ("env", "open", "(func (param i32 i32) (result i32))"),
    ("env", "connect", "(func (param i32 i32) (result i32))"),
    ("env", "getenv", "(func (param i32) (result i32))"),
    ("env", "time", "(func (result i64))"),
    ("env", "memory", "(memory 1)"),
    ("env", "table", "(table 1 funcref)"),
    ("env", "now", "(global i64)"),
]


@pytest.mark.parametrize(
    ("module", "name", "kind"), HOST_IMPORTS, ids=[f"{m}.{n}" for m, n, _ in HOST_IMPORTS]
)
def test_a_module_importing_a_host_capability_is_refused_at_load(
    module: str, name: str, kind: str
) -> None:
    wat = f'(module (import "{module}" "{name}" {kind}) {ALLOC})'
    if name == "memory":  # the module's own memory would be a second one
        wat = f'(module (import "{module}" "{name}" {kind}) (func (export "twg_alloc") (param i32) (result i32) (i32.const 0)))'
    with pytest.raises(WasmModuleError) as caught:
        WasmModule(wasmtime.wat2wasm(wat), name="sneaky.wasm")
    text = str(caught.value)
    assert f"`{module}.{name}`" in text
    assert "sneaky.wasm" in text
    assert "imports nothing" in text


def test_the_example_module_imports_nothing_and_loads() -> None:
    module = WasmModule.from_file(EXAMPLE)
    assert module.compiled().imports == []
    assert module.name == "udf_example.wasm"
    assert len(module.data) < 4096  # built opt-level "s", panic = "abort", no std


def test_a_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.wasm"
    big.write_bytes(b"\0asm" + b"\0" * 2000)
    with pytest.raises(WasmModuleError, match=r"`big.wasm`: expected at most 1000 bytes; got 2004"):
        WasmModule.from_file(big, max_bytes=1000)
    with pytest.raises(WasmModuleError, match=r"expected at most 1000 bytes; got 2004"):
        WasmModule(big.read_bytes(), max_bytes=1000)


def test_bytes_that_are_not_wasm_are_refused_with_the_remedy(tmp_path: Path) -> None:
    bad = tmp_path / "not.wasm"
    bad.write_bytes(b"#!/bin/sh\necho hi\n")
    with pytest.raises(
        WasmModuleError, match=r"`not.wasm`: expected a WebAssembly binary.*cargo build"
    ):
        WasmModule.from_file(bad)
    with pytest.raises(WasmModuleError, match=r"expected a readable file"):
        WasmModule.from_file(tmp_path / "missing.wasm")


def test_the_abi_exports_are_required() -> None:
    no_alloc = wasmtime.wat2wasm('(module (memory (export "memory") 1))')
    with pytest.raises(
        WasmModuleError, match=r"expected an export `twg_alloc\(size: i32\) -> i32`.*got none"
    ):
        WasmModule(no_alloc)
    no_memory = wasmtime.wat2wasm(
        '(module (memory 1) (func (export "twg_alloc") (param i32) (result i32) (i32.const 8)))'
    )
    with pytest.raises(
        WasmModuleError, match=r"expected a 32-bit linear memory exported as `memory`"
    ):
        WasmModule(no_memory)
    wrong = wasmtime.wat2wasm(
        '(module (memory (export "memory") 1) (func (export "twg_alloc") (param i64) (result i64) (i64.const 8)))'
    )
    with pytest.raises(WasmModuleError, match=r"got \(i64\) -> \(i64\)"):
        WasmModule(wrong)


def test_a_function_whose_signature_does_not_match_its_arguments_is_refused() -> None:
    module = WasmModule.from_file(EXAMPLE)
    with pytest.raises(
        ValueError,
        match=r"expected module `udf_example.wasm` to export `safe_div` taking 5 i32.*got \(i32, i32, i32, i32, i32, i32, i32\) -> \(i32\)",
    ):
        WasmFunction(module, "safe_div", args=["int64"], returns="int64")
    with pytest.raises(ValueError, match=r"to export `nope`.*got no such export"):
        WasmFunction(module, "nope", args=["int64"], returns="int64")
    with pytest.raises(ValueError, match=r"expected `returns` to be 'int64' or 'float64'"):
        WasmFunction(module, "utf8_chars", args=["utf8"], returns="utf8")
    with pytest.raises(
        ValueError, match=r"expected a type of 'int64', 'float64' or 'utf8'; got 'int8'"
    ):
        WasmFunction(module, "utf8_chars", args=["int8"], returns="int64")


def test_a_module_that_starts_over_the_memory_cap_is_refused() -> None:
    big = wat_module(
        f'(func (export "f") {UNARY} (i32.const 0))',
        alloc=ALLOC.replace('(memory (export "memory") 1)', '(memory (export "memory") 64)'),
    )
    with pytest.raises(
        ValueError, match=r"to start within the memory cap of 1048576 bytes; it starts at 4194304"
    ):
        WasmFunction(
            big, "f", args=["int64"], returns="int64", memory_limit_bytes=1 << 20, chunk_rows=16
        )


def test_a_chunk_that_cannot_fit_the_memory_cap_is_refused_at_build() -> None:
    with pytest.raises(ValueError, match=r"lower `chunk_rows` or raise `memory_limit_bytes`"):
        WasmFunction(
            EXAMPLE,
            "safe_div",
            args=["int64", "int64"],
            returns="int64",
            memory_limit_bytes=2 << 20,
        )


def test_a_module_is_compiled_once_per_process_and_pickles_as_its_bytes() -> None:
    first = WasmModule.from_file(EXAMPLE)
    second = WasmModule(EXAMPLE.read_bytes())
    assert first.compiled() is second.compiled()
    assert sum(1 for key in _compiled if key[1] == first.digest) == 1
    back = pickle.loads(pickle.dumps(first))
    assert back.data == first.data and back.name == first.name
    assert back.compiled() is first.compiled()
    fn = WasmFunction(first, "celsius_to_fahrenheit", args=["float64"], returns="float64")
    assert pickle.loads(pickle.dumps(fn)).module.digest == first.digest


def test_without_wasmtime_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wasmtime", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "thalweg-bytewax\[wasm\]"'):
        WasmModule.from_file(EXAMPLE)
