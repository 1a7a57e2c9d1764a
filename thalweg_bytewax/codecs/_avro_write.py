"""Columnar Avro writer: an Arrow batch to one Avro body per row, without a row loop.

Every Avro type is written for a whole column at once into a ``binary`` array with one
(non-null) encoding per row: zigzag varints from numpy, floats and fixed values from the
Arrow buffers, strings as a varint length joined to the bytes, arrays and maps as
``count + items + 0`` over the flattened items, records as the row-wise join of their
fields (``pyarrow.compute.binary_join_element_wise``). A union writes its branch index in
front of each row's value. The leaf types (numbers, text, bytes, fixed, enum)
are :mod:`._avro_leaves`'. Only a value Arrow cannot hold in a columnar form (a union
of several branches given as a plain column, a recursive type) is written with fastavro
one value at a time, for that column only.

Values that do not fit the schema raise :class:`~thalweg_bytewax.codecs.base.EncodeError`
naming the field path and the batch row: a null in a non-nullable field, an integer out
of range, an unknown enum symbol, a decimal that does not fit, a missing column.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_leaves import LEAF_WRITERS
from thalweg_bytewax.codecs._avro_scalars import (
    fail,
    wrong_type,
)
from thalweg_bytewax.codecs._encode_errors import check_known_columns
from thalweg_bytewax.codecs._wire import (
    EMPTY,
    body_slices,
    join,
    repeat,
    zigzag,
)
from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["write_bodies"]

_I32 = (-(2**31), 2**31 - 1)


class _Writer:
    """Encodes columns for one parsed (``expand=True``) Avro schema."""

    def __init__(self, parsed: Mapping[str, Any]) -> None:
        self._parsed = parsed
        self._named: Mapping[str, Any] = parsed.get("__named_schemas", {})
        self._sub: dict[str, Any] = {}

    def record(
        self, node: Mapping[str, Any], arr: pa.StructArray, path: str, rows: np.ndarray
    ) -> pa.Array:
        names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        fields = arr.flatten() if arr.type.num_fields else []
        known = {f["name"] for f in node["fields"]}
        check_known_columns(
            "avro encoder",
            path,
            names,
            known,
            lacked_by=f"the schema `{node['name']}`",
            remedy="drop the column or evolve the schema",
        )
        parts = []
        for f in node["fields"]:
            sub = f"{path}.{f['name']}" if path else f["name"]
            idx = names.get(f["name"])
            if idx is not None:
                parts.append(self.value(f["type"], fields[idx], sub, rows))
            elif "default" in f:
                parts.append(repeat(self.one(f["type"], f["default"]), len(arr)))
            else:
                msg = (
                    f"avro encoder: expected column `{sub}` (schema `{node['name']}` has "
                    f"no default for it); got columns {list(names)}; add the column"
                )
                raise EncodeError(msg, column=sub)
        if not parts:
            return repeat(b"", len(arr))
        return join(parts)

    def one(self, schema: Any, value: Any) -> bytes:
        """One value written by fastavro (defaults, and the per-value fallback)."""
        key = json.dumps(schema, sort_keys=True, default=str)
        parsed = self._sub.get(key)
        if parsed is None:
            try:  # an expanded sub-schema defines every name it uses ...
                parsed = fastavro.parse_schema(schema, named_schemas={})
            except fastavro.schema.UnknownType:  # ... except a recursive reference
                parsed = fastavro.parse_schema(schema, named_schemas=dict(self._named))
            self._sub[key] = parsed
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, value)
        return buf.getvalue()

    def _per_value(self, schema: Any, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        out = []
        for i, v in enumerate(arr.to_pylist(maps_as_pydicts="strict")):
            try:
                out.append(self.one(schema, v))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise fail(path, rows, i, f"value {v!r} does not fit the schema ({exc})") from exc
        return pa.array(out, pa.binary())

    def value(self, schema: Any, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        """Every row of ``arr`` encoded as Avro ``schema``; nulls only where it allows."""
        if isinstance(schema, list):
            return self._union(schema, arr, path, rows)
        if isinstance(schema, str):
            if schema in self._named:  # a recursive reference parse could not expand
                return self._per_value(self._named[schema], arr, path, rows)
            schema = {"type": schema}
        kind = schema["type"]
        if kind == "null":
            return repeat(b"", len(arr))
        if arr.null_count:
            valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            first = int(np.flatnonzero(~valid)[0])
            raise fail(path, rows, first, "expected a value (the schema is not nullable); got null")
        leaf = LEAF_WRITERS.get(kind)
        if leaf is not None:
            return leaf(schema, arr, path, rows)
        writer = self._WRITERS.get(kind)
        if writer is None:  # pragma: no cover - fastavro rejects unknown types at parse
            return self._per_value(schema, arr, path, rows)
        return writer(self, schema, arr, path, rows)

    def _union(self, branches: list[Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        kinds = [b if isinstance(b, str) else b.get("type") for b in branches]
        if pa.types.is_union(arr.type) and arr.type.mode == "dense":
            return self._dense_union(branches, arr, path, rows)
        if len(branches) != 2 or "null" not in kinds:  # noqa: PLR2004 - ["null", T]
            return self._per_value(branches, arr, path, rows)
        null_at = kinds.index("null")
        other = branches[1 - null_at]
        n = len(arr)
        null_tag = zigzag(np.array([null_at], np.int64))[0].as_py()
        if not arr.null_count:
            tag = zigzag(np.array([1 - null_at], np.int64))
            enc = self.value(other, arr, path, rows)
            return join([tag[0].as_py(), enc])
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        keep = np.flatnonzero(valid)
        enc = self.value(other, arr.filter(pa.array(valid)), path, rows[keep])
        tagged = join([zigzag(np.array([1 - null_at], np.int64))[0].as_py(), enc])
        pool = pa.concat_arrays([tagged, pa.array([null_tag], pa.binary())])
        index = np.full(n, len(enc), dtype=np.int64)
        index[keep] = np.arange(len(keep))
        return pool.take(pa.array(index))

    def _dense_union(
        self, branches: list[Any], arr: pa.UnionArray, path: str, rows: np.ndarray
    ) -> pa.Array:
        codes = np.asarray(arr.type_codes.to_numpy(zero_copy_only=False), dtype=np.int64)
        offs = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        pool, base = [], np.zeros(max(arr.type.type_codes, default=0) + 1, np.int64)
        start = 0
        for child_index, code in enumerate(arr.type.type_codes):
            if code >= len(branches):
                bad = np.flatnonzero(codes == code)
                raise fail(
                    path,
                    rows,
                    int(bad[0]) if len(bad) else 0,
                    f"union type code {code} names no branch",
                )
            child = arr.field(child_index)
            child_rows = np.zeros(len(child), np.int64)
            mine = np.flatnonzero(codes == code)
            child_rows[offs[mine]] = rows[mine]
            enc = self.value(branches[code], child, f"{path}.{code}", child_rows)
            tag = zigzag(np.array([code], np.int64))[0].as_py()
            pool.append(join([tag, enc]))
            base[code] = start
            start += len(enc)
        if not pool:
            return repeat(b"", len(arr))
        return pa.concat_arrays(pool).take(pa.array(base[codes] + offs))

    def _blocks(self, counts: np.ndarray, item_enc: pa.Array, item_offsets: np.ndarray) -> pa.Array:
        """``count + items + 0`` per row (``0`` alone for an empty row)."""
        body = body_slices(item_enc, item_offsets)
        head = zigzag(counts)
        head = pc.if_else(pa.array(counts > 0), head, EMPTY)
        return join([head, body, b"\x00"])

    def _array(
        self, node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray
    ) -> pa.Array:
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise wrong_type(path, "a list column for an Avro array", arr)
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        counts = np.diff(offsets)
        items = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
        enc = self.value(node["items"], items, f"{path}[]", np.repeat(rows, counts))
        return self._blocks(counts, enc, offsets - offsets[0])

    def _map(self, node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        if not pa.types.is_map(arr.type):
            raise wrong_type(path, "a map column for an Avro map", arr)
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        counts = np.diff(offsets)
        lo, hi = int(offsets[0]), int(offsets[-1])
        item_rows = np.repeat(rows, counts)
        keys = self.value(
            {"type": "string"}, arr.keys.slice(lo, hi - lo), f"{path}{{key}}", item_rows
        )
        vals = self.value(node["values"], arr.items.slice(lo, hi - lo), f"{path}{{}}", item_rows)
        return self._blocks(counts, join([keys, vals]), offsets - lo)

    def _record(
        self, node: Mapping[str, Any], arr: pa.Array, path: str, rows: np.ndarray
    ) -> pa.Array:
        if not pa.types.is_struct(arr.type):
            raise wrong_type(path, f"a struct column for record `{node['name']}`", arr)
        return self.record(node, arr, path, rows)

    _WRITERS: Mapping[str, Callable[[Any, Mapping[str, Any], Any, str, np.ndarray], pa.Array]] = {
        "array": _array,
        "map": _map,
        "record": _record,
        "error": _record,
    }


def write_bodies(parsed: Mapping[str, Any], batch: pa.RecordBatch) -> pa.BinaryArray:
    """One Avro body per row of ``batch`` for the record schema ``parsed``.

    Args:
        parsed: A record schema from ``fastavro.parse_schema(..., expand=True)``.
        batch: Columns named after the record's fields (nested records as structs).

    Raises:
        EncodeError: When a value does not fit the schema (names column and row).
    """
    struct = (
        pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
        if batch.num_columns
        else pa.array([{}] * batch.num_rows, pa.struct([]))
    )
    rows = np.arange(batch.num_rows, dtype=np.int64)
    return _Writer(parsed).record(parsed, struct, "", rows)
