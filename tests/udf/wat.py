"""Hostile and minimal WASM modules for the sandbox tests, written as WAT text.

Each is compiled by ``wasmtime.wat2wasm`` in the test that uses it. ``ALLOC`` is a
bump allocator implementing the ABI's ``twg_alloc`` over a one-page memory.
"""

from __future__ import annotations

from pathlib import Path

import wasmtime

from thalweg_bytewax.udf import WasmModule

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures/wasm/udf_example/udf_example.wasm"
"""The compiled example module (Rust source beside it)."""

ALLOC = """
  (memory (export "memory") 1)
  (global $top (mut i32) (i32.const 1024))
  (func (export "twg_alloc") (param $size i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (i32.and (i32.add (global.get $top) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (block $ok
      (br_if $ok (i32.le_u (local.get $end) (local.get $have)))
      (br_if $ok (i32.ne
        (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (local.get $have))
                                         (i32.const 16)) (i32.const 1)))
        (i32.const -1)))
      (return (i32.const 0)))
    (global.set $top (local.get $end))
    (local.get $p))
"""

UNARY = "(param $n i32) (param $x i32) (param $xv i32) (param $o i32) (param $ov i32) (result i32)"
"""The ABI signature of a function of one int64 / float64 argument."""

LOOP_FOREVER = f'(func (export "f") {UNARY} (loop $l (br $l)) (i32.const 0))'
"""Never ends."""

GROW_FOREVER = f"""(func (export "f") {UNARY}
  (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
  unreachable)"""
"""Grows its memory until it cannot, then aborts (what an allocator does)."""

DIVIDE_100_BY_X = f"""(func (export "f") {UNARY} (local $i i32)
  (loop $l
    (i64.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 3)))
      (i64.div_s (i64.const 100)
        (i64.load (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 3))))))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
  (i32.const 0))"""
"""``100 / x`` per row: traps (integer divide by zero) on a row where x is 0."""

SPIN_X_TIMES = f"""(func (export "f") {UNARY} (local $i i32) (local $k i64)
  (loop $rows
    (local.set $k (i64.load (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 3)))))
    (block $done (loop $spin
      (br_if $done (i64.le_s (local.get $k) (i64.const 0)))
      (local.set $k (i64.sub (local.get $k) (i64.const 1)))
      (br $spin)))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (br_if $rows (i32.lt_u (local.get $i) (local.get $n))))
  (i32.const 0))"""
"""Spins ``x`` times per row: a row's cost is its value (fuel tests)."""

STATUS_7 = f'(func (export "f") {UNARY} (i32.const 7))'
"""Fails every call with status 7."""

CALLS_SO_FAR = f"""(global $calls (mut i64) (i64.const 0))
(func (export "f") {UNARY} (local $i i32)
  (global.set $calls (i64.add (global.get $calls) (i64.const 1)))
  (loop $l
    (i64.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 3)))
      (global.get $calls))
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
  (i32.const 0))"""
"""Writes how many times it was called in this instance: 1 when each call is fresh."""


def wat_module(body: str, *, alloc: str = ALLOC, name: str = "hostile") -> WasmModule:
    """A module of ``alloc`` and ``body``, compiled from WAT."""
    return WasmModule(wasmtime.wat2wasm(f"(module {alloc} {body})"), name=name)
