"""WASM functions as DuckDB scalar functions: columnar, one call per DuckDB vector.

:func:`register` creates each :class:`~thalweg_bytewax.udf.function.WasmFunction` on a
DuckDB connection as an Arrow-vectorised Python function (``create_function(...,
type="arrow")``): DuckDB hands over a whole vector of each argument as Arrow arrays
(2,048 rows), and the function runs once over it in the module. Nulls are passed
through (``null_handling="special"``), so the module sees each argument's validity
and may make a row null itself.

DuckDB reports a failure inside the function only as text; the
:class:`~thalweg_bytewax.udf.function.WasmUdfError` itself is kept for the thread that
ran the query, and :func:`take_failure` hands it to the caller, which names its step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from thalweg_bytewax.system.thread_slots import ThreadSlots
from thalweg_bytewax.udf.function import WasmFunction, WasmUdfError

__all__ = ["register", "take_failure"]

# The last failure per OS thread (a cluster's worker gets an empty threading.local per batch).
_failures: ThreadSlots[list[WasmUdfError | None]] = ThreadSlots(lambda: [None])


def take_failure() -> WasmUdfError | None:
    """The WASM failure of this thread's last failed query, cleared as it is taken."""
    slot = _failures.get()
    failure, slot[0] = slot[0], None
    return failure


def _vectorised(fn: WasmFunction) -> Callable[..., pa.Array]:
    def run(*arrays: pa.Array | pa.ChunkedArray) -> pa.Array:
        try:
            return fn(*arrays)
        except WasmUdfError as exc:
            _failures.get()[0] = exc
            raise

    # DuckDB counts a Python function's parameters against the argument types.
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_ONLY)
            for i in range(len(fn.args))
        ]
    )
    return run


def register(con: Any, functions: Sequence[WasmFunction]) -> None:
    """Create ``functions`` on the DuckDB connection ``con``, by their SQL names."""
    for fn in functions:
        params, result = fn.duckdb_types
        con.create_function(
            fn.name,
            _vectorised(fn),
            params,
            result,
            type="arrow",
            null_handling="special",
            side_effects=False,
        )
