"""Columnar wire primitives shared by the encoders: binary arrays built from numpy.

Varints (Avro and Protobuf), zigzag, fixed-width values and the row-wise join that
concatenates one encoding per column into one payload per row. No Python loop per row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "EMPTY",
    "binary",
    "body_slices",
    "fixed_width",
    "join",
    "repeat",
    "varint",
    "varints",
    "zigzag",
]

EMPTY = pa.scalar(b"", pa.binary())
"""The empty ``binary`` scalar (separator of the row-wise join)."""


def binary(offsets: np.ndarray, data: np.ndarray) -> pa.BinaryArray:
    """A ``binary`` array over ``data`` cut at ``offsets`` (``n + 1`` of them)."""
    n = len(offsets) - 1
    offs = pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int32))
    arr = pa.Array.from_buffers(pa.binary(), n, [None, offs, pa.py_buffer(data)])
    return arr


def repeat(value: bytes, n: int) -> pa.BinaryArray:
    """``value`` in each of ``n`` rows."""
    k = len(value)
    data = np.tile(np.frombuffer(value, dtype=np.uint8), n) if k else np.zeros(0, np.uint8)
    return binary(np.arange(n + 1, dtype=np.int64) * k, data)


def fixed_width(values: np.ndarray, width: int) -> pa.BinaryArray:
    """Each row's ``width`` raw bytes of a contiguous numpy array."""
    data = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    return binary(np.arange(len(values) + 1, dtype=np.int64) * width, data)


def varints(z: np.ndarray) -> pa.BinaryArray:
    """Unsigned LEB128 varints of ``uint64`` values, one row each."""
    z = z.astype(np.uint64, copy=False)
    n = len(z)
    nbytes = np.ones(n, dtype=np.int64)
    rest = z >> np.uint64(7)
    while rest.any():
        nbytes += rest != 0
        rest >>= np.uint64(7)
    width = int(nbytes.max()) if n else 1
    mat = np.empty((n, width), dtype=np.uint8)
    for b in range(width):
        low = ((z >> np.uint64(7 * b)) & np.uint64(0x7F)).astype(np.uint8)
        mat[:, b] = low | ((nbytes > b + 1).astype(np.uint8) << 7)
    data = mat[np.arange(width) < nbytes[:, None]]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nbytes, out=offsets[1:])
    return binary(offsets, data)


def zigzag(values: np.ndarray) -> pa.BinaryArray:
    """Avro ``int`` / ``long`` encodings (zigzag varints) of ``int64`` values."""
    v = values.astype(np.int64, copy=False)
    return varints(((v << 1) ^ (v >> 63)).view(np.uint64))


def join(parts: list[pa.Array | bytes]) -> pa.BinaryArray:
    """The row-wise concatenation of binary arrays of one length.

    A ``bytes`` part is the same in every row (a tag, a terminator): Arrow broadcasts
    it, so no array of repeats is built. At least one part must be an array.
    """
    if len(parts) == 1 and isinstance(parts[0], pa.Array):
        return parts[0]
    args = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*args, EMPTY)


def varint(value: int) -> bytes:
    """The unsigned varint of one non-negative value (a tag, a branch index)."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def body_slices(enc: pa.BinaryArray, item_offsets: np.ndarray) -> pa.BinaryArray:
    """Row ``i`` = the bytes of items ``item_offsets[i]:item_offsets[i + 1]`` of ``enc``.

    Zero-copy over the items' data: items of one row are contiguous already.
    """
    bufs = enc.buffers()
    m, o = len(enc), enc.offset
    offs = np.frombuffer(bufs[1], np.int32)[o : o + m + 1].astype(np.int64)
    buf = bufs[2]
    data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
    starts = offs[item_offsets]
    return binary(starts - starts[0], data[starts[0] : starts[-1]])
