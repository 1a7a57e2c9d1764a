"""Lossless widening: which column type changes keep every value, per target."""

from __future__ import annotations

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.typemap._canonical import Conversion, Target, canonical_type, same_type

__all__ = ["can_widen_to", "fits"]

# Decimal digits left of the point that every value of an integer type needs.
_INT_DIGITS = {pa.int16(): 5, pa.int32(): 10, pa.int64(): 19}
# Integers a float holds exactly: all of int16 in real (24-bit significand), up to
# int32 in double precision (53 bits). int64 into double is lossy, so never a widening.
_INT_FLOATS = {
    pa.int16(): (pa.float32(), pa.float64()),
    pa.int32(): (pa.float64(),),
}
_INT_ORDER = (pa.int16(), pa.int32(), pa.int64())


def can_widen_to(
    old: pa.DataType,
    new: pa.DataType,
    *,
    target: Target = "postgres",
    conversion: Conversion | None = None,
) -> bool:
    """Whether a column of ``old``'s target type can become ``new``'s without loss.

    Both types are mapped to the target first, so ``can_widen_to(uint32, int64)`` is
    true (both are ``bigint``). The relation is reflexive and transitive, and every
    value of ``old`` round-trips through ``new`` unchanged.

    * PostgreSQL: ``smallint`` → ``integer`` → ``bigint``; ``smallint`` → ``real``;
      ``smallint``, ``integer`` → ``double precision``; ``real`` → ``double precision``;
      integers → ``numeric(p,s)`` with at least their digits left of the point;
      ``numeric(p,s)`` → ``numeric(p',s')`` when neither integer digits nor scale
      shrink; arrays element-wise.
    * Iceberg (what its schema evolution allows): ``int`` → ``long``; ``float`` →
      ``double``; ``decimal(P, S)`` → ``decimal(P', S)`` with ``P' >= P``.

    Anything else (narrowing, a zone added or dropped, nested into text) is not a
    widening; the write boundary handles those only with an explicit conversion.

    Args:
        old: The column's current type (any Arrow type; mapped to the target).
        new: The wanted type.
        target: ``"postgres"`` or ``"iceberg"``.
        conversion: An opt-in conversion for the column (``"truncate"`` admits ns).

    Returns:
        False too when either type cannot be held by the target at all.
    """
    try:
        a = canonical_type(old, target, conversion=conversion)
        b = canonical_type(new, target, conversion=conversion)
    except SchemaError:
        return False
    return _widens(a, b, target)


def fits(
    batch: pa.DataType,
    column: pa.DataType,
    *,
    target: Target = "postgres",
    conversion: Conversion | None = None,
) -> bool:
    """Whether values of ``batch`` type land in a column of ``column`` type losslessly.

    The same relation as :func:`can_widen_to` (``int32`` values fit a ``bigint``
    column), read from the write side: no DDL is needed, the batch is cast.
    """
    return can_widen_to(batch, column, target=target, conversion=conversion)


def _widens(a: pa.DataType, b: pa.DataType, target: Target) -> bool:  # noqa: PLR0911
    if same_type(a, b):
        return True
    if target == "iceberg":
        if (a, b) in ((pa.int32(), pa.int64()), (pa.float32(), pa.float64())):
            return True
        return bool(
            pa.types.is_decimal(a)
            and pa.types.is_decimal(b)
            and a.scale == b.scale
            and b.precision >= a.precision
        )
    if a in _INT_DIGITS:
        if b in _INT_DIGITS:
            return _INT_ORDER.index(a) <= _INT_ORDER.index(b)
        if b in _INT_FLOATS.get(a, ()):
            return True
        return bool(pa.types.is_decimal(b) and b.precision - b.scale >= _INT_DIGITS[a])
    if (a, b) == (pa.float32(), pa.float64()):
        return True
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):
        return bool(b.scale >= a.scale and b.precision - b.scale >= a.precision - a.scale)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return _widens(a.value_type, b.value_type, target)
    return False
