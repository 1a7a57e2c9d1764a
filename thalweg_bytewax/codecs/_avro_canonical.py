"""Whether the fast path's decoded values were written in their one canonical encoding.

polars reads any non-null branch index of ``["null", T]`` as ``T``, fastavro any
non-zero boolean byte as ``true``, and polars a ``uuid`` as any string; the rows whose
bytes or text are not the canonical ones go to the exact path, which reports them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_sizes import record_sizes, value_sizes, zz_size
from thalweg_bytewax.codecs._avro_types import AvroNode

__all__ = ["has_tags", "noncanonical_tags", "tag_errors", "uuids_canonical"]


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
            pos += field_sizes[i] if field_sizes is not None else value_sizes(arr, child)
    return bad


def noncanonical_tags(bodies: pa.BinaryArray, arrays: list[pa.Array], node: AvroNode) -> np.ndarray:
    """:func:`tag_errors` for rows decoded elsewhere: only rows whose layout is proven.

    A row written in another valid layout (several array blocks, padded varints) has a
    different recomputed size; its tag positions are unknown, so it is never flagged.
    """
    sizes = record_sizes(arrays, node)
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
            pos += np.where(present, value_sizes(field_arr, child), 0)
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
        before = np.concatenate([[0], np.cumsum(value_sizes(values, child))])[:-1]
        row_start = before[list_offsets[:-1][counts > 0]]
        start = np.repeat((pos + zz_size(counts))[counts > 0] - row_start, counts[counts > 0])
        item_bad = _check(data, values, child, start + before, np.repeat(present, counts))
        rows = np.repeat(np.arange(len(pos)), counts)
        bad[rows[item_bad]] = True
        return bad
    return bad


_UUID_TEXT = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def uuids_canonical(arr: pa.Array, node: AvroNode) -> bool:
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
        return uuids_canonical(arr, node.children[0])
    if kind == "record":
        return all(uuids_canonical(arr.field(i), c) for i, c in enumerate(node.children))
    if kind == "array":
        return uuids_canonical(arr.flatten(), node.children[0])
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
