"""The Avro columnar fast path: one in-memory Object Container File, read by polars.

The Avro bodies of one batch that share a writer schema are concatenated into a single
OCF block and decoded by ``polars.read_avro`` (~14x faster here than fastavro per record
plus ``from_pylist``; see docs/codecs-avro.md). polars has hard limits, so this path is
used only when it can be proven exact:

* only for schemas inside :func:`supported` — no maps, no unions other than
  ``["null", T]``, enums only as top-level fields, decimals up to 18 digits, no
  recursive types (maps and nested enums panic, other unions are rejected);
* ``default`` attributes are stripped from the schema given to polars (a non-null
  default fails to parse there; decoding never needs a writer's defaults);
* one block per writer schema (mixing writer schemas in one block returns wrong data
  without an error);
* any ``Exception`` (except ``MemoryError``) and polars' ``PanicException``, which is
  not an ``Exception``, return ``None`` and the caller decodes the group on the exact
  path; ``KeyboardInterrupt``, ``SystemExit`` and ``MemoryError`` propagate;
* **record boundaries are verified**: polars reads the block as one byte stream, so a
  truncated body would shift every record after it. After decoding, the encoded size of
  every row is recomputed from the decoded columns (vectorised) and must equal the body
  length of that payload; any difference falls back to the exact path. With every
  boundary proven, each row was decoded from exactly its own bytes.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs._nulls import required_children

__all__ = [
    "available",
    "cast_exact",
    "decode_block",
    "has_tags",
    "noncanonical_tags",
    "ocf_header",
    "ocf_schema_json",
    "supported",
    "tag_errors",
]

_SYNC = os.urandom(16)
_MAX_FAST_DECIMAL_PRECISION = 18  # unscaled values fit int64, so sizes stay vectorised
_polars: Any = None
# polars' panic type (a BaseException), set when polars loads; until then nothing polars
# raises can reach an ``except``, so plain ``Exception`` stands in.
_PanicException: type[BaseException] = Exception


def _load_polars() -> Any:
    global _polars, _PanicException  # noqa: PLW0603 - lazy optional import, once per process
    if _polars is None:
        try:
            import polars  # noqa: PLC0415 - optional extra `fast`
            from polars.exceptions import PanicException  # noqa: PLC0415
        except ImportError:
            _polars = False
        else:
            _PanicException = PanicException
            _polars = polars
    return _polars or None


def available() -> bool:
    """Whether polars (the ``fast`` extra) is importable."""
    return _load_polars() is not None


def supported(node: AvroNode, *, top: bool = True) -> bool:
    """Whether the fast path is proven exact for this (writer) schema."""
    kind = node.kind
    if kind == "record":
        # An enum is fast only as a direct field of the top-level record.
        return all(top if c.kind == "enum" else supported(c, top=False) for c in node.children)
    if kind == "prim":
        return not pa.types.is_null(node.arrow)
    if kind in ("uuid", "fixed"):
        return True
    if kind == "decimal":
        precision: int = node.arrow.precision
        return precision <= _MAX_FAST_DECIMAL_PRECISION
    if kind == "enum":
        return top
    if kind == "array":
        c = node.children[0]
        return c.kind != "enum" and supported(c, top=False)
    if kind == "nullable":
        c = node.children[0]
        return c.kind != "enum" and supported(c, top=False)
    return False  # map, union


def _strip_and_inline(node: Any, named: dict[str, Any], ns: str | None) -> Any:
    """Schema JSON polars can read: no defaults, every named-type use expanded in place.

    polars resolves no named-type references, so each use of a named type repeats its
    definition (safe: recursive types never reach the fast path).
    """
    if isinstance(node, str):
        full = node if "." in node or ns is None else f"{ns}.{node}"
        for key in (full, node):
            if key in named:
                return _strip_and_inline(named[key], named, ns)
        return node
    if isinstance(node, list):
        return [_strip_and_inline(b, named, ns) for b in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "default" and not k.startswith("__")}
    t = node.get("type")
    if t in ("record", "error", "enum", "fixed") and "name" in node:
        name = node["name"]
        space = node.get("namespace", ns)
        full = name if "." in name or not space else f"{space}.{name}"
        named.setdefault(full, node)
        ns = full.rsplit(".", 1)[0] if "." in full else space
        out["name"] = full
        out.pop("namespace", None)
        if "fields" in node:
            out["fields"] = [
                {
                    **{k: v for k, v in f.items() if k != "default"},
                    "type": _strip_and_inline(f["type"], named, ns),
                }
                for f in node["fields"]
            ]
        return out
    if t == "array":
        out["items"] = _strip_and_inline(node["items"], named, ns)
    elif t == "map":
        out["values"] = _strip_and_inline(node["values"], named, ns)
    elif isinstance(t, dict | list) or (isinstance(t, str) and t in named):
        out["type"] = _strip_and_inline(t, named, ns)
    return out


def ocf_schema_json(schema: Any, named: Mapping[str, Any]) -> str:
    """Self-contained schema JSON for the OCF header: references inlined, no defaults."""
    return json.dumps(_strip_and_inline(schema, dict(named), None))


def _zz(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z & ~0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        else:
            out.append(z)
            return bytes(out)


def ocf_header(schema_json: str) -> bytes:
    """The OCF file header (magic, metadata map, sync marker) for ``schema_json``."""
    meta = {b"avro.schema": schema_json.encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += _zz(len(meta))
    for k, v in meta.items():
        out += _zz(len(k)) + k + _zz(len(v)) + v
    out += _zz(0) + _SYNC
    return bytes(out)


def _ocf_block(header: bytes, bodies: pa.BinaryArray) -> bytes:
    """One OCF file holding ``bodies`` as its only block, built with a single copy.

    The bodies are contiguous in the array's data buffer, so the block's payload is a
    view of it; ``bytes.join`` copies each part once.
    """
    n = len(bodies)
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + n + 1
    ]
    data = bodies.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    body = memoryview(data)[start:end] if data is not None else b""
    return b"".join((header, _zz(n), _zz(end - start), body, _SYNC))


def decode_block(header: bytes, node: AvroNode, bodies: pa.BinaryArray) -> pa.RecordBatch | None:
    """Decode ``bodies`` (one writer schema) to a batch of exact types, or ``None``.

    ``None`` means "use the exact path": polars is missing or failed, or a decoded row's
    re-computed encoded size differs from its body length.
    """
    pl = _load_polars()
    if pl is None or len(bodies) == 0:
        return None
    block = _ocf_block(header, bodies)
    try:
        table = pl.read_avro(io.BytesIO(block)).to_arrow()
        if table.num_rows != len(bodies):
            return None
        arrays = [
            cast_exact(_one_chunk(table.column(i)), child.arrow)
            for i, child in enumerate(node.children)
        ]
        batch = pa.RecordBatch.from_arrays(
            arrays,
            schema=pa.schema(
                [c.arrow_field(n) for n, c in zip(node.field_names, node.children, strict=False)]
            ),
        )
        field_sizes = [_sizes(a, c) for a, c in zip(arrays, node.children, strict=False)]
        sizes = np.zeros(len(bodies), dtype=np.int64)
        for field_size in field_sizes:
            sizes += field_size
        if not np.array_equal(sizes, _lengths(bodies)):
            return None
        # The layout is proven; a non-canonical branch or boolean byte goes to the exact
        # path, which reports the row.
        if has_tags(node) and tag_errors(bodies, arrays, node, field_sizes).any():
            return None
        # polars reads a uuid as any string; the exact path parses it (and fails, or
        # writes it canonical), so anything but the canonical form goes there.
        if not all(_uuids_canonical(a, c) for a, c in zip(arrays, node.children, strict=False)):
            return None
    except MemoryError:
        # Not a limit of polars: the exact path needs more memory (a dict per record),
        # so falling back would only hide the exhaustion.
        raise
    except (Exception, _PanicException):
        # polars' PanicException derives from BaseException; catch it by name so that
        # KeyboardInterrupt and SystemExit still propagate.
        return None
    return batch


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array; polars' single chunk as it is (``combine_chunks`` copies it)."""
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def _lengths(bodies: pa.BinaryArray) -> npt.NDArray[np.int64]:
    """Each body's byte length (0 for a null)."""
    if bodies.null_count:
        return _ints(pc.binary_length(bodies), pa.int64())
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + len(bodies) + 1
    ]
    return np.diff(offsets).astype(np.int64)


def tag_errors(
    bodies: pa.BinaryArray,
    arrays: list[pa.Array],
    node: AvroNode,
    field_sizes: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Rows whose union branch bytes or boolean bytes are not the canonical ones.

    For a batch whose layout is proven (each row's size recomputed from the decoded
    values equals its body length): each such byte's position follows from the field
    sizes, so it is compared (vectorised) with the byte the decoded value encodes to.
    polars reads any non-null branch index of ``["null", T]`` as ``T`` and fastavro any
    non-zero boolean byte as ``true``; Avro allows only 0/1 and the declared branches.
    ``field_sizes`` (each top-level field's encoded size per row) saves recomputing them.
    """
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + len(bodies) + 1
    ].astype(np.int64)
    buf = bodies.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    pos = offsets[:-1].copy()
    present = np.ones(len(bodies), dtype=bool)
    bad = np.zeros(len(bodies), dtype=bool)
    last = min(len(arrays), len(node.children)) - 1
    for i, (arr, child) in enumerate(zip(arrays, node.children, strict=False)):
        bad |= _check(data, arr, child, pos, present)
        if i < last:  # the position after the last field is never read
            pos += field_sizes[i] if field_sizes is not None else _sizes(arr, child)
    return bad


def noncanonical_tags(bodies: pa.BinaryArray, arrays: list[pa.Array], node: AvroNode) -> np.ndarray:
    """:func:`tag_errors` for rows decoded elsewhere: only rows whose layout is proven.

    A row written in another valid layout (several array blocks, padded varints) has a
    different recomputed size; its tag positions are unknown, so it is never flagged.
    """
    sizes = _sizes_record(arrays, node)
    lengths = pc.binary_length(bodies).to_numpy(zero_copy_only=False)
    proven = sizes == lengths
    if not proven.any():
        return np.zeros(len(bodies), dtype=bool)
    flagged: np.ndarray = tag_errors(bodies, arrays, node) & proven
    return flagged


def has_tags(node: AvroNode) -> bool:
    """Whether ``node`` holds union branch bytes or booleans (see :func:`tag_errors`)."""
    if node.kind == "nullable" or (node.kind == "prim" and pa.types.is_boolean(node.arrow)):
        return True
    return any(has_tags(c) for c in node.children)


def _check(
    data: np.ndarray, arr: pa.Array, node: AvroNode, pos: np.ndarray, present: np.ndarray
) -> np.ndarray:
    """Per value of ``arr`` (encoded at ``pos`` where ``present``): a wrong tag byte."""
    kind = node.kind
    bad = np.zeros(len(pos), dtype=bool)
    if not has_tags(node) or not present.any():
        return bad
    if kind == "nullable":
        branches = node.avro if isinstance(node.avro, list) else []
        null_first = bool(branches) and branches[0] == "null"
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        # zigzag branch index 0 -> byte 0, index 1 -> byte 2
        want = np.where(valid != null_first, 0, 2).astype(np.uint8)
        bad[present] = data[pos[present]] != want[present]
        bad |= _check(data, arr, node.children[0], pos + 1, present & valid & ~bad)
        return bad
    if kind == "prim":  # boolean
        values = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint8)
        bad[present] = data[pos[present]] != values[present]
        return bad
    if kind == "record":
        pos = pos.copy()
        for i, child in enumerate(node.children):
            field_arr = arr.field(i)
            bad |= _check(data, field_arr, child, pos, present & ~bad)
            pos += np.where(present, _sizes(field_arr, child), 0)
        return bad
    if kind == "array":
        list_offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        counts = np.diff(list_offsets)
        values = arr.values.slice(list_offsets[0], list_offsets[-1] - list_offsets[0])
        if len(values) == 0:
            return bad
        list_offsets = list_offsets - list_offsets[0]
        child = node.children[0]
        # one block: count, the items, then a 0 terminator (the size check proved it)
        before = np.concatenate([[0], np.cumsum(_sizes(values, child))])[:-1]
        row_start = before[list_offsets[:-1][counts > 0]]
        start = np.repeat((pos + _zz_size(counts))[counts > 0] - row_start, counts[counts > 0])
        item_bad = _check(data, values, child, start + before, np.repeat(present, counts))
        rows = np.repeat(np.arange(len(pos)), counts)
        bad[rows[item_bad]] = True
        return bad
    return bad


_UUID_TEXT = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def _uuids_canonical(arr: pa.Array, node: AvroNode) -> bool:
    """Whether every ``uuid`` value in ``arr`` is what ``str(uuid.UUID(text))`` gives."""
    kind = node.kind
    if kind == "uuid":
        if len(arr) == arr.null_count:
            return True
        if pa.types.is_string(arr.type):
            return _uuid_texts_canonical(arr.drop_null() if arr.null_count else arr)
        matched = pc.match_substring_regex(arr, _UUID_TEXT)
        return bool(pc.all(matched).as_py())
    if not _has_uuid(node):
        return True
    if kind == "nullable":
        return _uuids_canonical(arr, node.children[0])
    if kind == "record":
        return all(_uuids_canonical(arr.field(i), c) for i, c in enumerate(node.children))
    if kind == "array":
        return _uuids_canonical(arr.flatten(), node.children[0])
    return True


_UUID_DASHES = np.array([8, 13, 18, 23])
_UUID_DIGITS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_LOWER_HEX = np.zeros(256, dtype=bool)
_LOWER_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = True


def _uuid_texts_canonical(arr: pa.StringArray) -> bool:
    """:data:`_UUID_TEXT` for a string array without nulls, on its bytes (no regex).

    Every value is 36 bytes: lower-case hex digits with ``-`` at 8, 13, 18 and 23.
    """
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + n + 1]
    if not (np.diff(offsets) == 36).all():
        return False
    data = arr.buffers()[2]
    if data is None:
        return n == 0
    text = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(n, 36)
    return bool(
        (text[:, _UUID_DASHES] == ord("-")).all() and _LOWER_HEX[text[:, _UUID_DIGITS]].all()
    )


def _has_uuid(node: AvroNode) -> bool:
    return node.kind == "uuid" or any(_has_uuid(c) for c in node.children)


def cast_exact(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast polars' output to the exact type; nested types child by child.

    A plain struct cast refuses a non-nullable child that holds nulls under null parent
    slots, so structs and lists are rebuilt around recursively cast children.
    """
    if arr.type == target:
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(target):
        children = [cast_exact(arr.field(i), f.type) for i, f in enumerate(target)]
        if mask is not None:
            children = required_children(children, target)
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        offsets = arr.offsets.cast(pa.int32())
        values = cast_exact(arr.values, target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(target)


_DECIMAL_LIMITS = np.array([1 << (8 * k - 1) for k in range(1, 8)], dtype=np.int64)
"""The smallest magnitude needing k + 1 two's-complement bytes, for k = 1..7."""

_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
"""The smallest zigzag value needing k + 2 varint bytes, for k = 0..8."""


def _zz_size(values: np.ndarray) -> npt.NDArray[np.int64]:
    v = np.asarray(values, dtype=np.int64)  # no copy for int64 input
    n = len(v)
    if not n:
        return np.ones(0, dtype=np.int64)
    # Most columns take one size for every row: lengths and counts under 64, and
    # longs such as timestamps of one era. The extremes of the zigzag values bound
    # every row's size, so such a column is one fill, without a per-row pass.
    lo, hi = int(v.min()), int(v.max())
    if lo >= -64 and hi < 64:
        return np.ones(n, dtype=np.int64)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    smallest = int(np.searchsorted(_VARINT_LIMITS, z.min(), side="right"))
    reached = int(np.searchsorted(_VARINT_LIMITS, z.max(), side="right"))
    if smallest == reached:
        return np.full(n, 1 + reached, dtype=np.int64)
    if reached - smallest > 2:  # wide values: one search
        return 1 + np.searchsorted(_VARINT_LIMITS, z, side="right")
    # Compare only against the limits between the extremes (one pass each).
    size = np.full(n, 1 + smallest, dtype=np.int64)
    for limit in _VARINT_LIMITS[smallest:reached]:
        size += z >= limit
    return size


def _ints(arr: pa.Array, as_type: pa.DataType) -> np.ndarray:
    if arr.null_count == 0 and arr.type == as_type:  # the usual column: a view
        view: np.ndarray = arr.to_numpy(zero_copy_only=False)
        return view
    values: np.ndarray = pc.fill_null(arr.cast(as_type), 0).to_numpy(zero_copy_only=False)
    return values


def _sizes_record(arrays: list[pa.Array], node: AvroNode) -> np.ndarray:
    n = len(arrays[0]) if arrays else 0
    total = np.zeros(n, dtype=np.int64)
    for arr, child in zip(arrays, node.children, strict=False):
        total += _sizes(arr, child)
    return total


def _sizes(arr: pa.Array, node: AvroNode) -> np.ndarray:  # noqa: PLR0911 - one case per type
    t = node.arrow
    kind = node.kind
    n = len(arr)
    if kind == "nullable":
        inner = _sizes(arr, node.children[0])
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        return 1 + np.where(valid, inner, 0)
    if kind == "record":
        return _sizes_record([arr.field(i) for i in range(arr.type.num_fields)], node)
    if kind == "array":
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        values = arr.values
        child = _sizes(values, node.children[0]) if len(values) else np.zeros(0, np.int64)
        cs = np.concatenate([[0], np.cumsum(child)])
        sums = cs[offsets[1:]] - cs[offsets[:-1]]
        counts = np.diff(offsets)
        return np.where(counts > 0, _zz_size(counts) + sums + 1, 1)
    if kind == "enum":
        idx = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        return _zz_size(_ints(idx, pa.int64()))
    if kind == "fixed" or (kind == "decimal" and node.size):
        return np.full(n, node.size, dtype=np.int64)
    if kind == "decimal":
        raw = np.frombuffer(arr.buffers()[1], dtype=np.int64)[2 * arr.offset : 2 * (arr.offset + n)]
        unscaled = raw[0::2]
        # Two's-complement bytes: v needs k + 1 bytes when |v| (as ~v for negatives)
        # reaches 2^(8k - 1); one search over the seven limits.
        magnitude = np.where(unscaled < 0, ~unscaled, unscaled)
        nbytes = 1 + np.searchsorted(_DECIMAL_LIMITS, magnitude, side="right").astype(np.int64)
        return _zz_size(nbytes) + nbytes
    if pa.types.is_boolean(t):
        return np.ones(n, dtype=np.int64)
    if pa.types.is_float32(t):
        return np.full(n, 4, dtype=np.int64)
    if pa.types.is_float64(t):
        return np.full(n, 8, dtype=np.int64)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        lengths: npt.NDArray[np.int64]
        if arr.null_count:
            lengths = _ints(pc.binary_length(arr), pa.int64())
        else:  # straight from the offsets buffer
            offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)
            lengths = np.diff(offsets[arr.offset : arr.offset + n + 1]).astype(np.int64)
        return _zz_size(lengths) + lengths
    if pa.types.is_int32(t) or pa.types.is_date32(t) or pa.types.is_time32(t):
        return _zz_size(_ints(arr, pa.int32()))
    if pa.types.is_int64(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return _zz_size(_ints(arr, pa.int64()))
    msg = f"no size rule for {t}"
    raise TypeError(msg)
