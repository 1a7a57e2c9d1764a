"""The rows of an Avro batch whose Kafka headers name their writer schema.

A producer may name a record's schema in a ``__value_schema_id`` header (a schema GUID)
instead of the Confluent frame; the Avro codec looks those rows up by their header.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs.base import HeadersInput
from thalweg_bytewax.errors import ConfigError

__all__ = ["header_rows"]


def header_rows(headers: HeadersInput, n: int) -> dict[int, list[tuple[str, bytes | None]]]:
    """Rows whose headers carry a schema GUID, with their headers."""
    if headers is None:
        return {}
    if isinstance(headers, pa.Array | pa.ChunkedArray):
        got = len(headers)
        index, rows = _schema_header_rows(headers) if got == n else ([], [])
    else:
        rows = list(headers)
        got = len(rows)
        index = list(range(got))
    if got != n:
        # A caller bug (misaligned columns), not bad data: no row's headers can be trusted.
        msg = f"avro codec: expected {n} header rows (one per payload); got {got}"
        raise ConfigError(msg)
    out: dict[int, list[tuple[str, bytes | None]]] = {}
    for i, hdrs in zip(index, rows, strict=True):
        if not hdrs:
            continue
        pairs = [(h["key"], h["value"]) if isinstance(h, dict) else tuple(h) for h in hdrs]
        if any(k == "__value_schema_id" for k, _ in pairs):
            out[i] = pairs
    return out


def _schema_header_rows(headers: pa.Array | pa.ChunkedArray) -> tuple[list[int], list[Any]]:
    """Only the rows with a ``__value_schema_id`` header, and their row numbers.

    Columnar: the header names are compared in one kernel call, so a batch without
    schema-id headers (the common case) never builds a Python object per row.
    """
    arr = headers.combine_chunks() if isinstance(headers, pa.ChunkedArray) else headers
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) or not (
        pa.types.is_struct(arr.type.value_type)
    ):  # not the RawBatch header shape: every row is looked at
        return list(range(len(arr))), arr.to_pylist()
    names = pc.struct_field(arr.flatten(), [0])
    hit = pc.fill_null(pc.equal(names, "__value_schema_id"), False)
    if not pc.any(hit).as_py():
        return [], []
    parents = pc.filter(pc.list_parent_indices(arr), hit)
    rows = pc.unique(parents)
    return rows.to_pylist(), arr.take(rows).to_pylist()
