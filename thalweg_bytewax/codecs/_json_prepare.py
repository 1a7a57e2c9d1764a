"""Private: Arrow columns rewritten into types DuckDB's ``to_json`` writes exactly.

Decimals become strings, instants RFC 3339 UTC text, timestamps without a zone text
without an offset, dates and times their ISO text, bytes base64; structs, maps and lists
are rewritten member by member with their own key paths (``a.b``, ``m{key}``, ``l[]``).
NaN and infinities raise an :class:`~thalweg_bytewax.codecs.base.EncodeError` naming the
column and row, or become ``null`` (:data:`NanPolicy`); a type with no JSON form
(unions, durations, intervals) is refused by name.
"""

from __future__ import annotations

import base64
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["ColumnPrep", "NanPolicy", "first_index", "row_error"]

NanPolicy = Literal["error", "null"]
"""What a :class:`~thalweg_bytewax.codecs.JsonEncoder` does with NaN and infinities: raise, or
write ``null``."""


def row_error(path: str, index: int, what: str, remedy: str) -> EncodeError:
    """An :class:`EncodeError` naming the column and the row, what was wrong and what to do."""
    msg = f"json encoder: column `{path}` row {index}: {what}; {remedy}"
    return EncodeError(msg, column=path, row=index)


def first_index(mask: pa.Array) -> int:
    """The index of the first true value of a boolean ``mask`` (one must be true)."""
    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))[0])


class ColumnPrep:
    """Rewrites a column into types DuckDB's ``to_json`` writes exactly."""

    def __init__(self, nan: NanPolicy) -> None:
        self._nan = nan

    def column(self, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:  # noqa: PLR0911 - one branch per type family
        t = arr.type
        if pa.types.is_dictionary(t):
            return self.column(arr.dictionary_decode(), path, rows)
        if pa.types.is_decimal(t):
            return arr.cast(pa.string())
        if pa.types.is_timestamp(t):
            if t.tz is None:
                return pc.strftime(arr, format="%Y-%m-%dT%H:%M:%S")
            utc = arr.cast(pa.timestamp(t.unit, "UTC"))
            return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%SZ")
        if pa.types.is_date(t):
            return pc.strftime(arr.cast(pa.date32()), format="%Y-%m-%d")
        if pa.types.is_time(t):
            return arr.cast(pa.string())
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            text = [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
            return pa.array(text, pa.string())
        if pa.types.is_floating(t):
            return self._floats(arr, path, rows)
        if pa.types.is_struct(t):
            children = [
                self.column(c, f"{path}.{t.field(i).name}", rows)
                for i, c in enumerate(arr.flatten())
            ]
            fields = [pa.field(t.field(i).name, c.type) for i, c in enumerate(children)]
            return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null())
        if pa.types.is_map(t):
            offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
            item_rows = np.repeat(rows, np.diff(offsets))
            lo, hi = int(offsets[0]), int(offsets[-1])
            keys = self.column(arr.keys.slice(lo, hi - lo), f"{path}{{key}}", item_rows)
            items = self.column(arr.items.slice(lo, hi - lo), f"{path}{{}}", item_rows)
            return pa.MapArray.from_arrays(
                pa.array(offsets - lo, pa.int32()), keys, items, mask=arr.is_null()
            )
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
            lo, hi = int(offsets[0]), int(offsets[-1])
            values = self.column(
                arr.values.slice(lo, hi - lo), f"{path}[]", np.repeat(rows, np.diff(offsets))
            )
            return pa.ListArray.from_arrays(
                pa.array(offsets - lo, pa.int32()), values, mask=arr.is_null()
            )
        if pa.types.is_union(t) or pa.types.is_duration(t) or pa.types.is_interval(t):
            msg = (
                f"json encoder: column `{path}`: expected a type with a JSON form; got "
                f"`{t}`; cast the column first (e.g. to string or int64)"
            )
            raise EncodeError(msg, column=path)
        return arr

    def _floats(self, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        finite = pc.is_finite(arr)
        bad = pc.invert(pc.fill_null(finite, True))
        if not pc.any(bad).as_py():
            return arr
        if self._nan == "null":
            return pc.if_else(bad, pa.scalar(None, arr.type), arr)
        i = first_index(bad)
        raise row_error(
            path,
            int(rows[i]),
            f"expected a finite number (JSON has no NaN or infinity); got {arr[i].as_py()!r}",
            "pass `nan='null'` to write null",
        )
