"""Private: what a conversion of rows to Arrow must check that pyarrow does not.

pyarrow converts some values with a silent loss: a float with a fraction into an integer
column, a datetime with a time of day (or a zone) into a date column, sub-unit
microseconds into a second or millisecond timestamp. :func:`lossy_check` names the
Python type to suspect per column type and the test that a value would lose data.
pyarrow also lets a null into a non-nullable field nested in a struct:
:func:`null_violations` masks the rows where one is, per field path.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["lossy_check", "null_violations"]

_MIDNIGHT = time(0)
# Sub-second units a datetime may carry into a timestamp column without a loss.
_UNIT_MICROS = {"s": 1_000_000, "ms": 1_000}


def _fraction(value: float) -> bool:
    return not value.is_integer()


def _time_of_day(value: date) -> bool:
    return isinstance(value, datetime) and (value.time() != _MIDNIGHT or value.tzinfo is not None)


def lossy_check(type_: pa.DataType) -> tuple[type, Any] | None:
    """(suspect Python type, predicate saying a value of it would lose data), or None."""
    if pa.types.is_integer(type_):
        return float, _fraction
    if pa.types.is_date(type_):
        return datetime, _time_of_day
    if pa.types.is_timestamp(type_) and type_.unit in _UNIT_MICROS:
        step = _UNIT_MICROS[type_.unit]
        return datetime, lambda v: v.microsecond % step != 0
    return None


def null_violations(field: pa.Field, column: pa.Array) -> list[tuple[str, pa.Array]]:
    """Per non-nullable (nested) field, a boolean mask of the rows where it is null."""
    out: list[tuple[str, pa.Array]] = []
    if not field.nullable and column.null_count:
        out.append((field.name, pc.is_null(column)))
    if pa.types.is_struct(field.type):
        valid = pc.is_valid(column)
        for i in range(field.type.num_fields):
            child = field.type.field(i)
            values = column.field(i)
            for name, nulls in null_violations(child, values):
                out.append((f"{field.name}.{name}", pc.and_(valid, nulls)))
    return out
