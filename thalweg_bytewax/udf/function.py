"""A WASM scalar function over Arrow columns: the ABI, fuel and memory per chunk, failures.

ABI version 1 (every pointer and length an ``i32``; the module imports nothing):

* ``memory``: the module's 32-bit linear memory;
* ``twg_alloc(size) -> ptr``: ``size`` fresh bytes, or 0 when memory cannot grow;
* the function: ``f(n, <arg buffers>..., out_values, out_validity) -> status``, where
  each ``int64`` / ``float64`` argument is ``values, validity`` and each ``utf8``
  argument is ``offsets, data, validity`` (``n + 1`` int32 offsets from 0). Validity is
  an Arrow bitmap (LSB first, 1 = valid), and 0 when the column has no nulls in the
  chunk. ``out_values`` has room for ``n`` 8-byte values; ``out_validity`` holds the
  AND of the arguments' validity on entry, and a function clears a bit to make its
  row null. Status 0 is success; anything else fails the chunk.

The host copies each chunk's buffers into a fresh instance of the module (a new
``wasmtime.Store`` per chunk: no state survives from one chunk to the next, and a bump
allocator that never frees is enough), calls the function once, and reads the output
buffers back into an Arrow array. Each chunk's store has its own fuel,
``fuel_per_call + fuel_per_row * rows`` (wasmtime counts about one unit per WASM
instruction), and its own memory cap (``Store.set_limits``). Every pointer the module
hands back is checked to lie inside its memory before the host writes or reads it.

A chunk fails with :class:`WasmUdfError` of a :class:`UdfFailure` kind: out of fuel (a
loop that does not end), past the memory cap, a trap (division by zero, ``unreachable``,
an out-of-bounds access), a non-zero status, or a pointer outside memory.
:meth:`WasmFunction.apply` then bisects the chunk (within a bounded number of extra
calls) so that only the rows that fail are reported, never the process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.udf._abi import (
    ARROW_TYPES,
    BUFFER_COUNTS,
    DUCKDB_TYPES,
    WASM_PAGE,
    ArgType,
)
from thalweg_bytewax.udf._chunk_call import call_chunk
from thalweg_bytewax.udf.failures import RowFailure, UdfFailure, UdfResult, WasmUdfError
from thalweg_bytewax.udf.module import (
    ABI_MEMORY,
    WasmModule,
    describe,
    is_signature,
)

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "DEFAULT_FUEL_PER_CALL",
    "DEFAULT_FUEL_PER_ROW",
    "DEFAULT_MAX_BISECT_CALLS",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "ArgType",
    "RowFailure",
    "UdfFailure",
    "UdfResult",
    "WasmFunction",
    "WasmUdfError",
]

DEFAULT_FUEL_PER_ROW = 1_000
"""Fuel per row of a chunk: about a thousand WASM instructions, far more than a pure
per-row transform needs (``celsius_to_fahrenheit`` spends under 20)."""
DEFAULT_FUEL_PER_CALL = 100_000
"""Fuel per call on top of the rows': the function's set-up and the allocations."""
DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024
"""The memory cap of one instance (64 MiB): a chunk of the default 65,536 rows of three
8-byte columns needs 1.5 MiB."""
DEFAULT_CHUNK_ROWS = 65_536
"""Rows per call: large enough that the per-call cost (a fresh instance, ~tens of µs)
is small per row, small enough that a chunk's buffers fit the memory cap."""
DEFAULT_MAX_BISECT_CALLS = 64
"""Extra calls a batch may spend bisecting failed chunks down to their failing rows: one
bad row in a 65,536-row chunk takes 32. Past it, the failed ranges are reported whole."""

_MAX_MEMORY_LIMIT_BYTES = 2**31
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _positive(value: int, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{where}: expected a positive integer `{what}`; got {value!r}"
        raise ConfigError(msg)
    return value


class WasmFunction:
    """A scalar function exported by a WASM module, run over Arrow columns a chunk at a time.

    Args:
        module: A :class:`~thalweg_bytewax.udf.module.WasmModule`, or the path of a
            ``.wasm`` file.
        export: The exported function's name.
        args: The argument types, in order: ``"int64"``, ``"float64"``, ``"utf8"``.
        returns: The result type: ``"int64"`` or ``"float64"``.
        name: The function's name in SQL (default: ``export``).
        fuel_per_row: Fuel per row of a chunk.
        fuel_per_call: Fuel per call on top of the rows'.
        memory_limit_bytes: The memory cap of the module's instance (at most 2 GiB).
        chunk_rows: Rows per call.
        max_bisect_calls: Extra calls a batch may spend isolating failing rows.

    Raises:
        ConfigError: When the export is missing or its signature does not match
            ``args`` (``1 + buffers + 2`` i32 parameters, one i32 result), a type is
            unknown, a bound is not positive, the module's initial memory is over the
            cap, or a chunk's fixed-width buffers do not fit in half of it.
    """

    def __init__(
        self,
        module: WasmModule | str | os.PathLike[str],
        export: str,
        *,
        args: Sequence[ArgType | str],
        returns: ArgType | str,
        name: str | None = None,
        fuel_per_row: int = DEFAULT_FUEL_PER_ROW,
        fuel_per_call: int = DEFAULT_FUEL_PER_CALL,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        max_bisect_calls: int = DEFAULT_MAX_BISECT_CALLS,
    ) -> None:
        self.module = module if isinstance(module, WasmModule) else WasmModule.from_file(module)
        self.export = export
        self.name = name or export
        where = f"wasm udf `{self.name}`"
        if not _NAME.match(self.name):
            msg = f"{where}: expected a plain identifier as its name; got {self.name!r}"
            raise ConfigError(msg)
        self.args = tuple(_arg_type(a, where) for a in args)
        self.returns = _arg_type(returns, where)
        if self.returns is ArgType.UTF8:
            msg = f"{where}: expected `returns` to be 'int64' or 'float64'; got 'utf8'"
            raise ConfigError(msg)
        self.fuel_per_row = _positive(fuel_per_row, "fuel_per_row", where)
        self.fuel_per_call = _positive(fuel_per_call, "fuel_per_call", where)
        self.memory_limit_bytes = _positive(memory_limit_bytes, "memory_limit_bytes", where)
        self.chunk_rows = _positive(chunk_rows, "chunk_rows", where)
        self.max_bisect_calls = max_bisect_calls
        if memory_limit_bytes > _MAX_MEMORY_LIMIT_BYTES:
            msg = (
                f"{where}: expected `memory_limit_bytes` of at most 2 GiB; got {memory_limit_bytes}"
            )
            raise ConfigError(msg)
        self._check_export(where)
        fixed = chunk_rows * 8 * (1 + sum(a is not ArgType.UTF8 for a in self.args))
        if fixed > memory_limit_bytes // 2:
            msg = (
                f"{where}: expected a chunk's buffers ({fixed} bytes for {chunk_rows} rows) "
                f"to fit in half the memory cap of {memory_limit_bytes} bytes; lower "
                f"`chunk_rows` or raise `memory_limit_bytes`"
            )
            raise ConfigError(msg)

    def _check_export(self, where: str) -> None:
        func = self.module.export_type(self.export)
        params = 1 + sum(BUFFER_COUNTS[a] for a in self.args) + 2
        if not is_signature(func, params):
            got = "no such export" if func is None else describe(func)
            msg = (
                f"{where}: expected module `{self.module.name}` to export `{self.export}` "
                f"taking {params} i32 parameters (n, {len(self.args)} argument(s)' buffers, "
                f"the output's values and validity) and returning an i32 status; got {got}"
            )
            raise ConfigError(msg)
        memory = self.module.export_type(ABI_MEMORY)
        if memory.limits.min * WASM_PAGE > self.memory_limit_bytes:
            msg = (
                f"{where}: expected module `{self.module.name}` to start within the memory "
                f"cap of {self.memory_limit_bytes} bytes; it starts at "
                f"{memory.limits.min * WASM_PAGE}; raise `memory_limit_bytes`"
            )
            raise ConfigError(msg)

    def __repr__(self) -> str:
        args = ", ".join(self.args)
        return f"WasmFunction({self.name}({args}) -> {self.returns}, {self.module!r})"

    @property
    def arrow_type(self) -> pa.DataType:
        """The Arrow type of the result."""
        return ARROW_TYPES[self.returns]

    @property
    def duckdb_types(self) -> tuple[list[str], str]:
        """The DuckDB argument types and result type, for ``create_function``."""
        return [DUCKDB_TYPES[a] for a in self.args], DUCKDB_TYPES[self.returns]

    def __call__(self, *arrays: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The function over whole columns, not bisected.

        Raises:
            WasmUdfError: For the first chunk that fails.
        """
        result = self.apply(arrays, bisect=False)
        if result.failures:
            raise result.failures[0].error
        return result.values

    def apply(
        self, arrays: Sequence[pa.Array | pa.ChunkedArray], *, bisect: bool = True
    ) -> UdfResult:
        """The function over columns of equal length, failing only the rows that fail.

        Each chunk of ``chunk_rows`` rows is one call. A chunk that fails is split in
        halves and each half called again (``bisect``), until the failing rows are
        isolated or the batch has spent ``max_bisect_calls`` extra calls; the ranges
        still failing are reported with their errors.

        Raises:
            ConfigError: When the columns do not match the arguments in number, length
                or type (a safe cast is applied: int32 to int64, large strings to utf8).
        """
        cols = self._columns(arrays)
        n = len(cols[0]) if cols else 0
        pieces: list[pa.Array] = []
        starts: list[tuple[int, int]] = []
        failures: list[RowFailure] = []
        budget = self.max_bisect_calls if bisect else 0
        for start in range(0, n, self.chunk_rows):
            stack = [(start, min(n, start + self.chunk_rows))]
            while stack:
                a, b = stack.pop()
                try:
                    pieces.append(call_chunk(self, cols, a, b))
                    starts.append((a, b))
                except WasmUdfError as exc:
                    if b - a == 1 or budget < 2:
                        failures.append(RowFailure(a, b, exc))
                        continue
                    budget -= 2
                    mid = (a + b) // 2
                    stack += [(mid, b), (a, mid)]
        values = (
            (pa.concat_arrays(pieces) if len(pieces) != 1 else pieces[0])
            if pieces
            else pa.array([], self.arrow_type)
        )
        if not failures:
            return UdfResult(values, None, ())
        ok = np.concatenate(
            [np.arange(a, b, dtype=np.int64) for a, b in starts] or [np.array([], np.int64)]
        )
        return UdfResult(values, ok, tuple(failures))

    def _columns(self, arrays: Sequence[pa.Array | pa.ChunkedArray]) -> list[pa.Array]:
        where = f"wasm udf `{self.name}`"
        if len(arrays) != len(self.args):
            msg = f"{where}: expected {len(self.args)} argument column(s); got {len(arrays)}"
            raise ConfigError(msg)
        cols: list[pa.Array] = []
        for i, (given, kind) in enumerate(zip(arrays, self.args, strict=True)):
            arr = given
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            if arr.type != ARROW_TYPES[kind]:
                try:
                    arr = arr.cast(ARROW_TYPES[kind])  # safe: refuses overflow and truncation
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    msg = (
                        f"{where}: expected argument {i + 1} to be {kind}; got a column "
                        f"of {arr.type} that does not cast safely ({exc})"
                    )
                    raise ConfigError(msg) from exc
            cols.append(arr)
        if cols and any(len(c) != len(cols[0]) for c in cols):
            msg = f"{where}: expected argument columns of one length; got {[len(c) for c in cols]}"
            raise ConfigError(msg)
        return cols


def _arg_type(value: ArgType | str, where: str) -> ArgType:
    try:
        return ArgType(value)
    except ValueError as exc:
        msg = f"{where}: expected a type of 'int64', 'float64' or 'utf8'; got {value!r}"
        raise ConfigError(msg) from exc
