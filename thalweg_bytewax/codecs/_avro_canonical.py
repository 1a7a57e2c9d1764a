"""Whether the fast path's decoded values were written in their one canonical encoding.

polars reads any non-null branch index of ``["null", T]`` as ``T``, fastavro any
non-zero boolean byte as ``true``, and polars a ``uuid`` as any string, several array
blocks as one list, a long past 64 bits as its low 64 bits and an empty decimal as 0;
the rows whose bytes or text are not the canonical ones go to the exact path, which
reports them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_sizes import (
    binary_lengths,
    decimal_nbytes,
    int_values,
    record_sizes,
    value_sizes,
    zz_size,
)
from thalweg_bytewax.codecs._avro_types import AvroNode

__all__ = ["has_tags", "noncanonical_tags", "tag_errors", "uuids_canonical"]


def tag_errors(
    bodies: pa.BinaryArray,
    arrays: list[pa.Array],
    node: AvroNode,
    field_sizes: list[np.ndarray] | None = None,
    *,
    varints: bool = False,
) -> np.ndarray:
    """Rows whose union branch bytes or boolean bytes are not the canonical ones.

    For a batch whose layout is proven (each row's size recomputed from the decoded
    values equals its body length): each such byte's position follows from the field
    sizes, so it is compared (vectorised) with the byte the decoded value encodes to.
    polars reads any non-null branch index of ``["null", T]`` as ``T`` and fastavro any
    non-zero boolean byte as ``true``; Avro allows only 0/1 and the declared branches.
    ``field_sizes`` (each top-level field's encoded size per row) saves recomputing them.

    ``varints``: also what takes its recomputed size yet says another value (polars'
    columns cannot show it): an array's count and an enum index must be the minimal
    varint of the decoded value (polars reads several blocks, or a sized one, as one
    list), and a long of ten bytes must end in 1 (the tenth byte holds bit 63 alone;
    polars may drop the bits past it). Every other value takes at least its recomputed
    size, so the equal sizes prove each value's bounds -- except a decimal of no bytes,
    which polars reads as 0 (one byte). Where the schema holds a bytes-backed decimal,
    each value's bounds are therefore proven where it is (:data:`_LAYOUT`).
    """
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + len(bodies) + 1
    ].astype(np.int64)
    buf = bodies.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    present = np.ones(len(bodies), dtype=bool)
    level = (_LAYOUT if _has_bytes_decimal(node) else _VALUES) if varints else _TAGS
    return _fields_bad(
        data, arrays, node.children, offsets[:-1], present, level=level, field_sizes=field_sizes
    )


_TAGS = 0
"""Check branch and boolean bytes."""
_VALUES = 1
"""Also array counts, enum indexes and the tenth byte of longs."""
_LAYOUT = 2
"""Also that each value ends where its recomputed size says: every varint, decimal
length and array terminator where it is, the values before it proven first."""


def noncanonical_tags(bodies: pa.BinaryArray, arrays: list[pa.Array], node: AvroNode) -> np.ndarray:
    """:func:`tag_errors` for rows decoded elsewhere: only rows whose layout is proven.

    A row written in another valid layout (several array blocks, padded varints) has a
    different recomputed size; its tag positions are unknown, so it is never flagged.
    """
    sizes = record_sizes(arrays, node)
    lengths = pc.binary_length(bodies).to_numpy(zero_copy_only=False)
    proven = sizes == lengths
    flagged = np.zeros(len(bodies), dtype=bool)
    if not proven.any():
        return flagged
    if proven.all():
        flagged |= tag_errors(bodies, arrays, node)
        return flagged
    # Only the proven rows are read: an unproven row's positions may lie past its body.
    keep = pa.array(proven)
    flagged[proven] = tag_errors(bodies.filter(keep), [a.filter(keep) for a in arrays], node)
    return flagged


def has_tags(node: AvroNode) -> bool:
    """Whether ``node`` holds union branch bytes or booleans (see :func:`tag_errors`)."""
    if node.kind == "nullable" or (node.kind == "prim" and pa.types.is_boolean(node.arrow)):
        return True
    return any(has_tags(c) for c in node.children)


def _fields_bad(
    data: np.ndarray,
    fields: list[pa.Array],
    children: list[AvroNode],
    pos: np.ndarray,
    present: np.ndarray,
    *,
    level: int,
    field_sizes: list[np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`_check` of a record's ``fields``, one after the other from ``pos``."""
    bad = np.zeros(len(pos), dtype=bool)
    pos = pos.copy()
    last = min(len(fields), len(children)) - 1
    for i, (arr, child) in enumerate(zip(fields, children, strict=False)):
        bad |= _check(data, arr, child, pos, present & ~bad, level=level)
        if i < last:  # the position after the last field is never read
            pos += field_sizes[i] if field_sizes is not None else value_sizes(arr, child)
    return bad


def _check(  # noqa: PLR0911 - one case per kind
    data: np.ndarray,
    arr: pa.Array,
    node: AvroNode,
    pos: np.ndarray,
    present: np.ndarray,
    *,
    level: int = _TAGS,
    field_sizes: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Per value of ``arr`` (encoded at ``pos`` where ``present``): a wrong byte.

    What is checked grows with ``level`` (:data:`_TAGS`, :data:`_VALUES`,
    :data:`_LAYOUT`). At :data:`_LAYOUT` each value's check, at a position proven by
    the checks of the values before it, proves it takes exactly its recomputed size;
    so the first value whose bytes are not its canonical encoding is found where it
    is, whatever the values after it add up to. Positions of values that are not
    ``present`` are never read. ``field_sizes``: a record's, if known.
    """
    kind = node.kind
    bad = np.zeros(len(pos), dtype=bool)
    if not present.any() or not (has_tags(node) or (level and _has_values(node, level))):
        return bad
    t = node.arrow
    if kind == "nullable":
        branches = node.avro if isinstance(node.avro, list) else []
        null_first = bool(branches) and branches[0] == "null"
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        # zigzag branch index 0 -> byte 0, index 1 -> byte 2
        want = np.where(valid != null_first, 0, 2).astype(np.uint8)
        bad[present] = data[pos[present]] != want[present]
        bad |= _check(data, arr, node.children[0], pos + 1, present & valid & ~bad, level=level)
        return bad
    if kind == "record":
        fields = [arr.field(i) for i in range(len(node.children))]
        return _fields_bad(
            data, fields, node.children, pos, present, level=level, field_sizes=field_sizes
        )
    if kind == "array":
        return _check_array(data, arr, node, pos, present, level=level)
    if kind == "prim" and pa.types.is_boolean(t):
        values = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint8)
        bad[present] = data[pos[present]] != values[present]
        return bad
    if kind == "enum":
        idx = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        return _varint_bad(data, pos, int_values(idx, pa.int64()), present)
    if kind == "decimal" and not node.size:
        # one length byte (at most 8 bytes here), then the fewest bytes of the value
        return _varint_bad(data, pos, decimal_nbytes(arr), present)
    if pa.types.is_string(t) or pa.types.is_binary(t):  # string, bytes, uuid
        return _varint_bad(data, pos, binary_lengths(arr), present)
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        as_type = pa.int32() if t.bit_width == 32 else pa.int64()  # noqa: PLR2004
        sizes = zz_size(int_values(arr, as_type))
        return _last_byte_bad(data, pos, sizes, present, ends=level == _LAYOUT)
    return bad  # float, double, fixed: their size is their type's


def _check_array(
    data: np.ndarray,
    arr: pa.Array,
    node: AvroNode,
    pos: np.ndarray,
    present: np.ndarray,
    *,
    level: int,
) -> np.ndarray:
    """:func:`_check` of an array: one block, its count, the items, then a 0 count."""
    bad = np.zeros(len(pos), dtype=bool)
    list_offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    counts = np.diff(list_offsets)
    child = node.children[0]
    if level:
        # polars reads a sized block (negative count) or several blocks as one list:
        # the count must be the list's length, written whole.
        bad |= _varint_bad(data, pos, counts, present)
    values = arr.values.slice(list_offsets[0], list_offsets[-1] - list_offsets[0])
    if len(values) == 0 or not (
        has_tags(child) or level == _LAYOUT or (level and _values_to_read(values, child))
    ):
        return bad  # no item has a byte to read: their positions are not needed
    list_offsets = list_offsets - list_offsets[0]
    field_sizes = None
    if child.kind == "record":  # each field's sizes, summed here and reused below
        field_sizes = [value_sizes(values.field(i), c) for i, c in enumerate(child.children)]
        sizes = np.zeros(len(values), dtype=np.int64)
        for one in field_sizes:
            sizes += one
    else:
        sizes = value_sizes(values, child)
    # one block: count, the items, then a 0 terminator
    before = np.concatenate([[0], np.cumsum(sizes)])
    full_rows = counts > 0
    if level == _LAYOUT:
        ends = pos + zz_size(counts) + before[list_offsets[1:]] - before[list_offsets[:-1]]
        rows = present & full_rows & ~bad
        bad[rows] |= data[ends[rows]] != 0
    before = before[:-1]
    row_start = before[list_offsets[:-1][full_rows]]
    start = np.repeat((pos + zz_size(counts))[full_rows] - row_start, counts[full_rows])
    item_present = np.repeat(present & ~bad, counts)
    item_bad = _check(
        data, values, child, start + before, item_present, level=level, field_sizes=field_sizes
    )
    rows_of = np.repeat(np.arange(len(pos)), counts)
    bad[rows_of[item_bad]] = True
    return bad


def _varint_bad(
    data: np.ndarray, pos: np.ndarray, values: np.ndarray, present: np.ndarray
) -> np.ndarray:
    """Where ``present``: whether the varint at ``pos`` is not the minimal one of ``values``.

    For a length, count or index, whose decoded value need not be what its varint says
    (polars reads a negative block count as its magnitude): every byte is compared.
    """
    v, at, rows = _present(np.asarray(values, dtype=np.int64), pos, present)
    bad = np.zeros(len(pos), dtype=bool)
    if not len(v):
        return bad
    z = (v << 1) ^ (v >> 63)
    if int(v.min()) >= -64 and int(v.max()) < 64:  # noqa: PLR2004 - one byte: z itself
        wrong = data[at] != z.astype(np.uint8)
    else:
        z = z.view(np.uint64)
        size = zz_size(v)
        wrong = np.zeros(len(v), dtype=bool)
        for j in range(int(size.max())):
            more = size > j
            digit = ((z >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
            want = np.where(size - 1 > j, digit | 0x80, digit).astype(np.uint8)
            wrong[more] |= data[at[more] + j] != want[more]
    if rows is None:
        return np.asarray(wrong, dtype=bool)
    bad[rows] = wrong
    return bad


def _last_byte_bad(
    data: np.ndarray, pos: np.ndarray, sizes: np.ndarray, present: np.ndarray, *, ends: bool
) -> np.ndarray:
    """Where ``present``: whether the long at ``pos`` does not end at its minimal size.

    Its decoded value (zigzag, as polars reads it) took ``sizes`` bytes at the least.
    The tenth byte holds only bit 63 (which a ten-byte size says is set), so it must be
    1: anything more is past 64 bits, which polars may drop. ``ends``: whether the
    varint's end is to be proven too (else the equal sizes prove it): a longer varint
    has the continuation bit set in its last byte, and a shorter one cannot hold the
    value.
    """
    size, at, rows = _present(np.asarray(sizes, dtype=np.int64), pos, present)
    if not len(size) or not (ends or int(size.max()) == 10):  # noqa: PLR2004
        return np.zeros(len(pos), dtype=bool)
    last = data[at + size - 1]
    wrong = last >= 0x80 if ends else np.zeros(len(size), dtype=bool)  # noqa: PLR2004
    if int(size.max()) == 10:  # noqa: PLR2004 - a value needing all 64 bits
        wrong |= (size == 10) & (last != 1)  # noqa: PLR2004
    if rows is None:
        return np.asarray(wrong, dtype=bool)
    bad = np.zeros(len(pos), dtype=bool)
    bad[rows] = wrong
    return bad


def _present(
    values: np.ndarray, pos: np.ndarray, present: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``values`` and ``pos`` where ``present``, and those rows (``None``: every row)."""
    if present.all():
        return values, pos, None
    rows = np.flatnonzero(present)
    return values[rows], pos[rows], rows


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
        # A null record's fields hold whatever the reader left there (polars: empty
        # strings): nothing was encoded for them, so they take the record's nulls.
        fields = (
            arr.flatten() if arr.null_count else [arr.field(i) for i in range(arr.type.num_fields)]
        )
        return all(uuids_canonical(f, c) for f, c in zip(fields, node.children, strict=True))
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


def _has_values(node: AvroNode, level: int) -> bool:
    """Whether ``node`` holds anything :func:`_check` reads at ``level`` beyond tags."""
    kind = node.kind
    if kind in ("array", "enum") or (kind == "decimal" and not node.size):
        return True
    t = node.arrow
    if kind == "prim" and (pa.types.is_integer(t) or pa.types.is_temporal(t)):
        return True
    if level == _LAYOUT and (kind == "uuid" or pa.types.is_string(t) or pa.types.is_binary(t)):
        return True
    return any(_has_values(c, level) for c in node.children)


def _values_to_read(arr: pa.Array, node: AvroNode) -> bool:
    """Whether :func:`_check` at :data:`_VALUES` reads a byte of ``arr`` (no tags in it).

    A long is read only when it takes ten bytes: when its magnitude reaches 2^62.
    """
    kind = node.kind
    if kind == "record":
        return any(_values_to_read(arr.field(i), c) for i, c in enumerate(node.children))
    t = node.arrow
    if kind == "prim" and (pa.types.is_integer(t) or pa.types.is_temporal(t)):
        if t.bit_width == 32 or len(arr) == arr.null_count:  # noqa: PLR2004 - at most 5 bytes
            return False
        extremes = pc.min_max(arr.cast(pa.int64()))
        lo, hi = extremes["min"].as_py(), extremes["max"].as_py()
        return bool(lo < -(2**62) or hi >= 2**62)
    return _has_values(node, _VALUES)


def _has_bytes_decimal(node: AvroNode) -> bool:
    return (node.kind == "decimal" and not node.size) or any(
        _has_bytes_decimal(c) for c in node.children
    )


def _has_uuid(node: AvroNode) -> bool:
    return node.kind == "uuid" or any(_has_uuid(c) for c in node.children)
