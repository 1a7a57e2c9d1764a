"""Sandboxed WASM user-defined functions over Arrow columns.

Pure transforms a user compiles to WebAssembly (Rust, C, Zig, AssemblyScript...) run
in-process, in a sandbox with nothing to reach: the module may import nothing (no WASI,
no host function: no filesystem, network, environment or clock), each call is
fuel-metered in proportion to its rows and memory-capped, and every failure (out of
fuel, past the cap, a trap) fails only its rows. The data crosses as Arrow buffers, a
chunk of a column per call, never a Python call per row.

* :mod:`.module`: loading a module (size bound, no imports, the ABI exports), compiled
  once per process;
* :mod:`.function`: the ABI, a function over Arrow columns, fuel, the memory cap,
  failures and their bisection down to the failing rows;
* :mod:`.failures`: what a call reports: why a chunk failed, which rows, the result;
* :mod:`.sql_functions`: the functions as DuckDB scalar functions.

The operators are ``twg.wasm_map`` and ``twg.wasm_sql`` (``thalweg_bytewax.operators``);
see ``docs/how-to/wasm-udf.md``. Needs the ``wasm`` extra (``wasmtime``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from .failures import RowFailure as RowFailure
    from .failures import UdfFailure as UdfFailure
    from .failures import UdfResult as UdfResult
    from .failures import WasmUdfError as WasmUdfError
    from .function import ArgType as ArgType
    from .function import WasmFunction as WasmFunction
    from .module import WasmModule as WasmModule
    from .module import WasmModuleError as WasmModuleError

__getattr__, __dir__ = lazy_reexports(globals())
