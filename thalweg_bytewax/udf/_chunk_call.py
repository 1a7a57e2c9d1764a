"""Private: one call of a WASM function over a chunk of rows, in a fresh instance.

A new ``wasmtime.Store`` per call with its own fuel and memory cap; the argument
buffers copied into one allocation of the module's, every pointer it hands back checked
against its memory; the output buffers read back as an Arrow array. A failure comes back
as a :class:`~thalweg_bytewax.udf.failures.WasmUdfError` of the kind that says why (out of
fuel, past the memory cap, a trap, a non-zero status, a pointer outside memory), with the
rows and what to do.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

import pyarrow as pa

from thalweg_bytewax.udf._abi import WASM_PAGE, ArgType, column_buffers, memory_base, validity_and
from thalweg_bytewax.udf.failures import UdfFailure, WasmUdfError
from thalweg_bytewax.udf.module import ABI_ALLOC, ABI_MEMORY, WasmModule, wasmtime

__all__ = ["ChunkFunction", "call_chunk"]

_MAX_TABLE_ELEMENTS = 65_536
_MAX_TABLES = 4


class ChunkFunction(Protocol):
    """What a call reads of a :class:`~thalweg_bytewax.udf.function.WasmFunction`."""

    module: WasmModule
    export: str
    name: str
    args: tuple[ArgType, ...]
    fuel_per_row: int
    fuel_per_call: int
    memory_limit_bytes: int

    @property
    def arrow_type(self) -> pa.DataType:
        """The Arrow type of the function's result."""


def call_chunk(fn: ChunkFunction, cols: list[pa.Array], start: int, stop: int) -> pa.Array:
    """One call of ``fn`` over rows ``start:stop`` in a fresh instance: fuel, cap, bounds.

    Raises:
        WasmUdfError: When the call fails, of the :class:`UdfFailure` kind that says why.
    """
    wt = wasmtime()
    n = stop - start
    fuel = fn.fuel_per_call + fn.fuel_per_row * n
    store = wt.Store(fn.module.engine())
    # One instance with one memory and a few small tables: the cap holds all of it.
    store.set_limits(
        memory_size=fn.memory_limit_bytes,
        table_elements=_MAX_TABLE_ELEMENTS,
        instances=1,
        tables=_MAX_TABLES,
        memories=1,
    )
    store.set_fuel(fuel)
    memory: Any = None
    try:
        exports = wt.Instance(store, fn.module.compiled(), []).exports(store)
        memory, alloc, func = exports[ABI_MEMORY], exports[ABI_ALLOC], exports[fn.export]
        slices = [c.slice(start, n) for c in cols]
        valid = validity_and(slices, n)
        # Every buffer in one allocation (one call into the module, not one per
        # buffer: a call costs tens of µs in the bindings), each 8-byte aligned.
        regions: list[tuple[Any, int] | None] = []
        for col, kind in zip(slices, fn.args, strict=True):
            regions += [
                None if src is None else (src, size) for src, size in column_buffers(col, kind)
            ]
        regions += [(None, 8 * n), (valid, len(valid))]
        offsets, total = [], 0
        for region in regions:
            offsets.append(total)
            total += 0 if region is None else (region[1] + 7) & ~7
        block = _alloc(fn, store, alloc, memory, total, start, stop)
        params = [n] + [
            0 if r is None else block + o for r, o in zip(regions, offsets, strict=True)
        ]
        writes = [
            (block + o, r[0], r[1])
            for r, o in zip(regions, offsets, strict=True)
            if r is not None and r[0] is not None
        ]
        out_ptr, ov_ptr = params[-2], params[-1]
        base = memory_base(memory, store)
        for ptr, src, size in writes:
            ctypes.memmove(base + ptr, src, size)
        ctypes.memmove(base + ov_ptr, valid, len(valid))
        status = func(store, *params)
        if status != 0:
            msg = _message(
                fn,
                start,
                stop,
                f"returned status {status}; expected 0",
                "see the module's own documentation for the status",
            )
            raise WasmUdfError(msg, UdfFailure.STATUS)
        base = memory_base(memory, store)  # the memory may have grown and moved
        values = ctypes.string_at(base + out_ptr, 8 * n)
        validity = ctypes.string_at(base + ov_ptr, len(valid))
    except wt.Trap as exc:
        raise _trap(fn, exc, store, memory, fuel, start, stop) from None
    except wt.WasmtimeError as exc:
        msg = _message(fn, start, stop, f"failed to run ({_first(exc)})", "fix the module")
        raise WasmUdfError(msg, UdfFailure.TRAP) from None
    return pa.Array.from_buffers(fn.arrow_type, n, [pa.py_buffer(validity), pa.py_buffer(values)])


def _alloc(
    fn: ChunkFunction, store: Any, alloc: Any, memory: Any, size: int, start: int, stop: int
) -> int:
    ptr: int = alloc(store, size)
    if ptr == 0:
        msg = _message(
            fn,
            start,
            stop,
            f"could not allocate {size} bytes within the memory cap of "
            f"{fn.memory_limit_bytes} bytes",
            "raise `memory_limit_bytes` or lower `chunk_rows`",
        )
        raise WasmUdfError(msg, UdfFailure.MEMORY)
    if ptr < 0 or ptr + size > memory.data_len(store):
        msg = _message(
            fn,
            start,
            stop,
            f"`{ABI_ALLOC}({size})` returned {ptr}, outside its memory of "
            f"{memory.data_len(store)} bytes",
            "fix the module's allocator",
        )
        raise WasmUdfError(msg, UdfFailure.ABI)
    return ptr


def _trap(
    fn: ChunkFunction, exc: Any, store: Any, memory: Any, fuel: int, start: int, stop: int
) -> WasmUdfError:
    # The fuel left, not the trap code: the trap codes' numbering moved between
    # wasmtime releases, an empty tank did not.
    if store.get_fuel() == 0:
        msg = _message(
            fn,
            start,
            stop,
            f"ran out of fuel ({fuel} units for {stop - start} row(s))",
            "the function does not end for these rows; fix its loop or raise `fuel_per_row`",
        )
        return WasmUdfError(msg, UdfFailure.FUEL)
    # wasmtime reports no failed `memory.grow`; a trap with the memory within an
    # eighth of its cap is taken as the cap reached (an allocator aborting).
    slack = max(WASM_PAGE, fn.memory_limit_bytes // 8)
    if memory is not None and memory.data_len(store) + slack > fn.memory_limit_bytes:
        msg = _message(
            fn,
            start,
            stop,
            f"trapped ({_first(exc)}) with its memory at {memory.data_len(store)} "
            f"bytes of its cap of {fn.memory_limit_bytes}",
            "raise `memory_limit_bytes` or make the function allocate less",
        )
        return WasmUdfError(msg, UdfFailure.MEMORY)
    msg = _message(fn, start, stop, f"trapped: {_first(exc)}", "fix the function")
    return WasmUdfError(msg, UdfFailure.TRAP)


def _message(fn: ChunkFunction, start: int, stop: int, what: str, remedy: str) -> str:
    rows = f"row {start}" if stop - start == 1 else f"rows {start}-{stop - 1}"
    rows += " of its input"
    return f"wasm udf `{fn.name}` ({fn.module.name}): {what} on {rows}; {remedy}"


def _first(exc: BaseException) -> str:
    """The cause line of a wasmtime error (``wasm trap: integer divide by zero``)."""
    text = str(getattr(exc, "message", "") or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
