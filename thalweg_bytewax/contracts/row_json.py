"""Rows of an Arrow batch as JSON objects, column-wise: the ``row_json`` of DLQ rows.

The text is exactly what ``orjson.dumps`` writes for the row as ``to_pylist`` gives it,
with two spellings JSON lacks: NaN and the infinities as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (``null`` would hide the very value a row was
rejected for), and values orjson has no form for as their text (decimals as
``"12.50"``, bytes as hex). Each column becomes one JSON fragment per row with Arrow
string kernels (lists and maps joined per row with ``binary_join``, structs and the row
object with ``binary_join_element_wise``); no Python loop runs over rows. Types without
an exact columnar spelling here (times, durations, half floats, nanosecond or zoned
instants, decimals that ``str`` writes in exponent form, dates outside years 1-9999)
are written value by value through orjson, for that column only.

When the optional C extension ``_native`` is built, the same text is written
by it straight from the Arrow buffers of the selected rows (no ``take``, no string
kernels); columns of a type it has no spelling for (floats, times, durations, decimals
past six places, zoned or nanosecond instants, ...) are rendered by the column-wise
path first and copied in as text. A value it cannot spell (a date or instant outside
years 1-9999) sends the batch to the column-wise path. A log line says which runs.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from thalweg_bytewax.contracts._row_json_columns import (
    columnwise_rows,
    json_default,
    spell_non_finite,
    value_json,
)
from thalweg_bytewax.contracts._row_json_native import concat_text, native_rows

try:
    from thalweg_bytewax.contracts import _native
except ImportError:  # built without a C compiler: Arrow string kernels write the same text
    _native = None  # type: ignore[assignment]

__all__ = [
    "NATIVE",
    "concat_text",
    "json_default",
    "rows_as_json",
    "spell_non_finite",
    "value_json",
]

NATIVE = _native is not None
"""Whether the native row JSON writer was built with the package."""

logger = logging.getLogger(__name__)
_announced = False


def rows_as_json(batch: pa.RecordBatch, rows: np.ndarray | None = None) -> pa.Array:
    """One JSON object per row of ``batch``, keyed by column name, in column order.

    Args:
        batch: The rows (typically a batch's payload columns).
        rows: Only these rows (indices into ``batch``, in this order), as if ``batch``
            were taken at them first; default all.

    Returns:
        A non-null ``string`` array, one object per row (per entry of ``rows``).

    Raises:
        IndexError: When an entry of ``rows`` is not a row of ``batch``.
    """
    index = None if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    if index is not None and len(index) and (index.min() < 0 or index.max() >= batch.num_rows):
        msg = (
            f"rows_as_json: row indices must lie in 0..{batch.num_rows - 1} (the batch's "
            f"rows), got {int(index.min())}..{int(index.max())}"
        )
        raise IndexError(msg)
    names = batch.schema.names
    unique = len(set(names)) == len(names)
    _announce()
    if unique and _native is not None:
        out = native_rows(batch, index)
        if out is not None:
            return out
    if index is not None:
        batch = batch.take(pa.array(index, pa.int64()))
    if not unique:
        # A dict keeps one value per key: the per-row form defines what that means.
        return pa.array([value_json(r) for r in batch.to_pylist()], pa.string())
    return columnwise_rows(batch)


def _announce() -> None:
    global _announced  # noqa: PLW0603 - one log line per process
    if _announced:
        return
    _announced = True
    if _native is not None:
        logger.info("row JSON: the native writer builds DLQ row JSON from Arrow buffers")
    else:
        logger.warning(
            "row JSON: the native writer was not built (no C compiler at install); DLQ "
            "row JSON is built with Arrow string kernels (the same text, more CPU per row)"
        )
