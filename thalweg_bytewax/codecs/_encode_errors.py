"""The errors the Avro and Protobuf encoders raise about a batch, worded once.

Each names the encoder, the field path and, for a value, the batch row of the first
offending one, and ends with what to do.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["check_known_columns", "type_error", "value_error"]


def value_error(encoder: str, path: str, rows: np.ndarray, index: int, what: str) -> EncodeError:
    """A bad value at ``index`` of a column (``rows`` maps it to its batch row)."""
    row = int(rows[index]) if len(rows) else index
    msg = f"{encoder}: column `{path}` row {row}: {what}; fix the value or the schema"
    return EncodeError(msg, column=path, row=row)


def type_error(encoder: str, path: str, expected: str, arr: pa.Array) -> EncodeError:
    """A column whose Arrow type the schema cannot take."""
    msg = (
        f"{encoder}: column `{path}`: expected {expected}; got `{arr.type}`; cast the "
        f"column or fix the schema"
    )
    return EncodeError(msg, column=path)


def check_known_columns(
    encoder: str, path: str, names: Iterable[str], known: set[str], *, lacked_by: str, remedy: str
) -> None:
    """Refuse a column of the struct at ``path`` (``""``: the batch) the schema lacks.

    Args:
        encoder: The encoder, as messages name it (``"avro encoder"``).
        path: The struct's field path, ``""`` for the batch.
        names: The struct's column names.
        known: The field names the schema has there.
        lacked_by: What lacks the column, e.g. ``"the schema `Order`"``.
        remedy: What to do, e.g. ``"drop the column"``.

    Raises:
        EncodeError: On the first column not in ``known``.
    """
    extra = [n for n in names if n not in known]
    if extra:
        where = f"`{path}`" if path else "the batch"
        msg = (
            f"{encoder}: {where} has column `{extra[0]}` {lacked_by} lacks; expected only "
            f"{sorted(known)}; {remedy}"
        )
        raise EncodeError(msg, column=f"{path}.{extra[0]}" if path else extra[0])
