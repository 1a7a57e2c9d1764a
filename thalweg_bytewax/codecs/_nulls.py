"""Arrow null handling shared by the codecs' columnar paths."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

__all__ = ["drop_validity", "rebuilt_struct", "required_children"]


def drop_validity(arr: pa.Array) -> pa.Array:
    """The same array without null slots (their values become unspecified).

    For children of a null struct slot only: those values are invisible.
    """
    if arr.null_count == 0:
        return arr
    t = arr.type
    if pa.types.is_struct(t):
        children = [drop_validity(arr.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return type(arr).from_arrays(arr.offsets, arr.values, type=t)
    if t.num_fields == 0:  # flat types: validity, then data (and offsets) buffers
        return pa.Array.from_buffers(t, len(arr), [None, *arr.buffers()[1:]], offset=arr.offset)
    return arr


def required_children(children: list[pa.Array], struct_type: pa.StructType) -> list[pa.Array]:
    """Children of a struct with null slots, made acceptable to the Parquet writer.

    A columnar reader (polars, ``pyarrow.json``) leaves nulls in a non-nullable child
    under null parent slots. That is valid Arrow, but ``pyarrow.parquet`` refuses it
    ("declared non-nullable but contains nulls"); the slots are invisible, so their
    validity is dropped.
    """
    return [
        c if f.nullable else drop_validity(c) for c, f in zip(children, struct_type, strict=True)
    ]


def rebuilt_struct(
    arr: pa.StructArray,
    struct_type: pa.StructType,
    child: Callable[[pa.Array, pa.DataType], pa.Array],
    mask: pa.BooleanArray | None,
) -> pa.StructArray:
    """A struct array of ``struct_type`` around ``arr``'s children, each made by ``child``.

    Args:
        arr: The struct array to rebuild (its children in ``struct_type``'s order).
        struct_type: The type to rebuild it as.
        child: Makes a child of its array and its field's type in ``struct_type``.
        mask: ``arr``'s null slots, or ``None`` when it has none; under them the
            children of non-nullable fields lose their nulls (:func:`required_children`).
    """
    children = [child(arr.field(i), f.type) for i, f in enumerate(struct_type)]
    if mask is not None:
        children = required_children(children, struct_type)
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)
