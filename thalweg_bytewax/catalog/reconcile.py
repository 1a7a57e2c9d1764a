"""The write boundary: make a batch's columns exactly the table's column types.

Called by a table sink for every batch, after the table was provisioned: lossless
differences are cast (``int32`` into ``bigint``, ``ms`` into ``us``), nested values
are serialised as JSON into ``jsonb`` columns, and two mismatches that used to fail
opaquely per batch are refused naming the column unless the user opted in:

* a nested value into a text column (opt in: ``conversions={"col": "json"}``);
* a timestamp with a zone into a zone-less column, or the reverse
  (opt in: ``conversions={"col": "utc"}``, UTC wall-clock time).

No value ever becomes NULL on the way: casts are checked (``safe=True``) and a NOT NULL
column receiving NULLs is refused with the count.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import date, time
from types import MappingProxyType
from typing import Any

import orjson
import pyarrow as pa

from thalweg_bytewax.catalog.steps import Column, TableShape
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.typemap import Conversion, Target, canonical_type, fits, is_nested, same_type

__all__ = ["WriteBoundaryError", "reconcile", "to_json_text"]

_NO_CONVERSIONS: Mapping[str, Conversion] = MappingProxyType({})


class WriteBoundaryError(SchemaError, ConfigError):
    """A batch column cannot be written into its table column without loss.

    The message names the table, the column, both types and the opt-in or remedy.
    """

    __module__ = "thalweg_bytewax.catalog"


def reconcile(
    batch: pa.RecordBatch,
    shape: TableShape,
    *,
    target: Target,
    table: str = "",
    conversions: Mapping[str, Conversion] = _NO_CONVERSIONS,
) -> pa.RecordBatch:
    """``batch`` with the table's columns, in table order, of the table's column types.

    A table column the batch lacks is filled with NULLs when nullable, left out when
    the table has a default for it, and refused otherwise.

    Args:
        batch: The batch about to be written.
        shape: The table as provisioned (``Plan.result`` or the adapter's description).
        target: ``"postgres"`` or ``"iceberg"``.
        table: The table's name, for messages.
        conversions: Per-column opt-ins (``"json"``, ``"utc"``, ``"truncate"``).

    Returns:
        A batch whose fields are the table's columns; the values are unchanged.

    Raises:
        WriteBoundaryError: A column is not in the table, cannot be converted without
            loss, or brings NULLs into a NOT NULL column; the message names it.
    """
    where = f"{target} table `{table}`" if table else f"{target} table"
    schema = batch.schema  # built anew on each access: read once
    target_schema = shape.arrow_schema
    if schema.equals(target_schema) or (
        schema.names == target_schema.names and schema.types == target_schema.types
    ):
        # The common case, once per batch on the hot path: the batch already has the
        # table's columns in order and of its types, so nothing converts.
        return _same_columns(batch, shape, where)
    known = set(shape.names)
    for name in schema.names:
        if name not in known:
            msg = (
                f"{where}: column `{name}` expected in the table; got a batch column the "
                f"table lacks; provision the table for this schema first (catalog.plan)"
            )
            raise WriteBoundaryError(msg)
    fields: list[pa.Field] = []
    arrays: list[pa.Array] = []
    for col in shape.columns:
        i = schema.get_field_index(col.name)
        if i < 0:
            if col.has_default:
                continue
            if not col.nullable:
                msg = (
                    f"{where}: column `{col.name}` expected in the batch (NOT NULL, no "
                    f"default); got none; add it upstream"
                )
                raise WriteBoundaryError(msg)
            arr = pa.nulls(batch.num_rows, col.type)
        else:
            arr = _convert(batch.column(i), col, target, conversions.get(col.name), where)
        if not col.nullable and arr.null_count:
            msg = (
                f"{where}: column `{col.name}` is NOT NULL; expected no NULLs; got "
                f"{arr.null_count} of {len(arr)}; filter or fill them upstream"
            )
            raise WriteBoundaryError(msg)
        fields.append(pa.field(col.name, col.type, nullable=col.nullable))
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _same_columns(batch: pa.RecordBatch, shape: TableShape, where: str) -> pa.RecordBatch:
    """``batch`` under the table's fields, when its columns already are the table's."""
    for i in shape.not_null_indexes:
        arr = batch.column(i)
        if arr.null_count:
            msg = (
                f"{where}: column `{shape.columns[i].name}` is NOT NULL; expected no NULLs; "
                f"got {arr.null_count} of {len(arr)}; filter or fill them upstream"
            )
            raise WriteBoundaryError(msg)
    target_schema = shape.arrow_schema
    if batch.schema.equals(target_schema, check_metadata=True):
        return batch  # already exactly what the general path would build
    return pa.RecordBatch.from_arrays(batch.columns, schema=target_schema)


def _convert(  # noqa: PLR0911 - one branch per rule of the module docstring
    arr: pa.Array,
    col: Column,
    target: Target,
    conversion: Conversion | None,
    where: str,
) -> pa.Array:
    src, dst = arr.type, col.type
    if src == dst:
        return arr
    try:
        home: pa.DataType | None = canonical_type(src, target, conversion=conversion)
    except SchemaError:
        home = None
    if isinstance(dst, pa.JsonType) and home is not None and isinstance(home, pa.JsonType):
        return pa.ExtensionArray.from_storage(dst, to_json_text(arr))
    if conversion == "json" and pa.types.is_string(dst) and _is_document(src):
        return to_json_text(arr)
    if (
        pa.types.is_timestamp(src)
        and pa.types.is_timestamp(dst)
        and ((src.tz is None) != (dst.tz is None))
    ):
        if conversion != "utc":
            msg = (
                f"{where}: column `{col.name}` is `{dst}`; expected the same zone "
                f"awareness; got `{src}`; opt in with conversions="
                f'{{"{col.name}": "utc"}} to write UTC wall-clock time'
            )
            raise WriteBoundaryError(msg)
        # Dropping the zone keeps the UTC wall clock; adding "UTC" reads it as UTC.
        arr = arr.cast(pa.timestamp(src.unit, tz=dst.tz))
        return _cast(arr, col, conversion, where)
    if pa.types.is_duration(src) and dst == pa.int64() and home == pa.int64():
        # Iceberg has no duration: a long of microseconds.
        return _cast(
            _cast(arr, Column(col.name, pa.duration("us")), conversion, where),
            col,
            conversion,
            where,
        )
    if home is not None and (
        same_type(home, dst) or fits(src, dst, target=target, conversion=conversion)
    ):
        return _cast(arr, col, conversion, where)
    remedy = "cast the column upstream, or write to a new column or table"
    if pa.types.is_string(dst) and _is_document(src):
        remedy = f'opt in with conversions={{"{col.name}": "json"}} to write it as JSON text'
    msg = (
        f"{where}: column `{col.name}` is `{dst}`; expected a batch type it holds "
        f"losslessly; got `{src}`; {remedy}"
    )
    raise WriteBoundaryError(msg)


def _is_document(t: pa.DataType) -> bool:
    return isinstance(t, pa.JsonType) or is_nested(t)


def _cast(arr: pa.Array, col: Column, conversion: Conversion | None, where: str) -> pa.Array:
    try:
        # Checked casts: a value that would change (overflow, truncation) raises
        # instead of becoming something else or NULL. "truncate" opts out of the
        # sub-microsecond check only.
        return arr.cast(col.type, safe=conversion != "truncate")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = (
            f"{where}: column `{col.name}` is `{col.type}`; expected values of "
            f"`{arr.type}` to convert without loss; got {type(exc).__name__}; "
            f"cast the column upstream"
        )
        raise WriteBoundaryError(msg) from exc


def to_json_text(arr: pa.Array) -> pa.Array:
    """JSON text (``string``) for each value of ``arr``; NULL stays NULL.

    Columnar through DuckDB's ``to_json``; union-typed values, which DuckDB cannot
    read from Arrow, go through orjson one value at a time (bytes as base64).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr.type, pa.JsonType):
        return arr.storage
    if _has_union(arr.type):
        return pa.array(
            [
                None if v is None else orjson.dumps(v, default=_default, option=_PASS).decode()
                for v in arr.to_pylist()
            ],
            pa.string(),
        )
    # DuckDB's session loads here, on the first nested value to write as JSON: a Parquet
    # sink (which imports this package for its schema steps) never loads the SQL engine.
    from thalweg_bytewax.sql.engine import shared_cursor  # noqa: PLC0415
    from thalweg_bytewax.sql.syntax import quote_ident  # noqa: PLC0415

    cur = shared_cursor()
    name = "_twg_json_input"
    cur.register(name, pa.table({"v": arr}))
    try:
        out = cur.sql(f"SELECT to_json({quote_ident('v')})::VARCHAR AS j FROM {name}")  # noqa: S608 - fixed names
        col = out.to_arrow_table().column(0)
    finally:
        cur.unregister(name)
    return col.combine_chunks().cast(pa.string())


def _has_union(t: pa.DataType) -> bool:
    if pa.types.is_union(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_union(f.type) for f in t)
    if pa.types.is_map(t):
        return _has_union(t.key_type) or _has_union(t.item_type)
    if hasattr(t, "value_type") and is_nested(t):
        return _has_union(t.value_type)
    return False


# Dates and times go to `_default`: orjson 3.13 drops a leading zero of a time's fraction
# when its microseconds are 10000..99999 ("01:02:03.16000" for .016000).
_PASS = orjson.OPT_PASSTHROUGH_DATETIME


def _default(v: Any) -> Any:
    if isinstance(v, date | time):
        return v.isoformat()
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode()
    return str(v)
