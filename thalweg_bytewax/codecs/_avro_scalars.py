"""Scalar columns for the Avro writer: checks, casts, decimals, and the errors they raise.

Every failure is an :class:`~thalweg_bytewax.codecs.base.EncodeError` naming the field
path and the batch row of the first offending value.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._encode_errors import type_error, value_error
from thalweg_bytewax.codecs._wire import binary, fixed_width, join, zigzag
from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["fail", "first_bad", "first_cast", "ints", "write_decimal", "wrong_type"]


fail = partial(value_error, "avro encoder")
"""An :class:`EncodeError` for a bad value: ``fail(path, rows, index, what)``."""
wrong_type = partial(type_error, "avro encoder")
"""An :class:`EncodeError` for a column type: ``wrong_type(path, expected, arr)``."""


def ints(arr: pa.Array, target: pa.DataType, path: str, rows: np.ndarray) -> np.ndarray:
    try:
        cast = arr.cast(target) if arr.type != target else arr
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise first_bad(arr, target, path, rows, str(exc)) from exc
    return np.asarray(cast.to_numpy(zero_copy_only=False))


def first_bad(
    arr: pa.Array, target: pa.DataType, path: str, rows: np.ndarray, why: str
) -> EncodeError:
    """The row whose value does not convert to ``target`` (the error path only)."""
    for i in range(len(arr)):
        try:
            arr.slice(i, 1).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return fail(path, rows, i, f"expected a value of `{target}`; got {arr[i]!r}")
    msg = (
        f"avro encoder: column `{path}`: expected Arrow values castable to `{target}`; "
        f"got `{arr.type}` ({why}); cast the column first"
    )
    return EncodeError(msg, column=path)


def first_cast(arr: pa.Array, target: pa.DataType, path: str, rows: np.ndarray) -> pa.Array:
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise first_bad(arr, target, path, rows, str(exc)) from exc


def write_decimal(arr: pa.Array, node: Mapping[str, Any], path: str, rows: np.ndarray) -> pa.Array:
    precision, scale = int(node["precision"]), int(node.get("scale", 0))
    width = 16 if precision <= 38 else 32  # noqa: PLR2004 - decimal128 holds 38 digits
    target = pa.decimal128(38, scale) if width == 16 else pa.decimal256(76, scale)  # noqa: PLR2004
    if not (pa.types.is_decimal(arr.type) or pa.types.is_integer(arr.type)):
        msg = (
            f"avro encoder: column `{path}`: expected a decimal column for "
            f"`decimal({precision}, {scale})`; got `{arr.type}`; cast the column first"
        )
        raise EncodeError(msg, column=path)
    try:
        dec = arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise first_bad(arr, target, path, rows, str(exc)) from exc
    buf = dec.buffers()[1]
    assert buf is not None
    le = np.frombuffer(buf, dtype=np.uint8)[dec.offset * width : (dec.offset + len(dec)) * width]
    be = le.reshape(-1, width)[:, ::-1]
    # Leading bytes that only repeat the sign are redundant: drop them (minimal length,
    # what fastavro and Java write). A run of them is a prefix, hence the cumprod.
    sign_only = (
        ((be[:, :-1] == 0) & (be[:, 1:] < 0x80))
        | (  # noqa: PLR2004
            (be[:, :-1] == 0xFF) & (be[:, 1:] >= 0x80)  # noqa: PLR2004
        )
    )
    drop = np.cumprod(sign_only, axis=1).sum(axis=1)
    lengths = width - drop
    limit = 10**precision
    if node["type"] == "fixed":
        size = int(node["size"])
        too_long = np.flatnonzero(lengths > size)
        if len(too_long):
            raise fail(path, rows, int(too_long[0]), f"decimal does not fit fixed({size})")
        # Sign-extend (or trim the sign bytes) to exactly ``size`` bytes.
        ext = np.where(be[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)  # noqa: PLR2004
        full = np.concatenate([np.repeat(ext, max(size - width, 0), axis=1), be], axis=1)
        return fixed_width(np.ascontiguousarray(full[:, full.shape[1] - size :]), size)
    data = be[np.arange(width) >= drop[:, None]]
    offsets = np.zeros(len(be) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    over = pc.greater_equal(pc.abs(dec), pa.scalar(limit).cast(target))
    bad = np.flatnonzero(np.asarray(over.to_numpy(zero_copy_only=False), dtype=bool))
    if len(bad):
        raise fail(path, rows, int(bad[0]), f"decimal has more than {precision} digits")
    return join([zigzag(lengths), binary(offsets, data)])
