"""The locator check of a sidecar's reply: no row dropped, reordered or invented.

A sidecar gets a batch with its ``_twg_`` columns and answers a batch. Each reply row
must carry the locator (``source_topic``, ``source_partition``, ``source_offset``) of
the request row it came from, in request order:

- ``one_to_one`` (the default): the reply has exactly the request's locators, row for
  row (a model scoring each row, a callout enriching it);
- ``one_to_many``: each request row becomes a run of one or more consecutive reply
  rows carrying its locator (a row exploded into its items). A request row with no
  reply row is still refused: filter downstream instead, where the rejects are
  visible.

Anything else (a row missing, two swapped, a locator the request did not have) raises
:class:`~thalweg_bytewax.errors.SidecarError` naming the first reply row at fault.
Every other metadata column of the request (record id, ingest time, the raw bytes...)
is taken from the request row for each reply row: a reply that carries one must hold
the same values (a sidecar does not rewrite provenance), one that lacks it gets it
back. The request's schema metadata (its input span) is kept too. All columnar.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.errors import SidecarError
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["RowMapping", "checked_reply", "require_locators"]

RowMapping = Literal["one_to_one", "one_to_many"]
"""How reply rows map to request rows: one each, or a run of one or more each."""


def require_locators(batch: pa.RecordBatch, columns: MetadataColumns, where: str) -> None:
    """Refuse a request without the locator columns, or with a null locator.

    Raises:
        SidecarError: Naming the missing columns and how to keep them.
    """
    names = _locator_names(
        batch,
        columns,
        f"{where}: the batch",
        "a sidecar's reply is checked by locator: keep it with metadata='locator' or 'all', "
        "or number rows with `twg.to_batches(..., locator='counter')`",
    )
    if any(batch.column(n).null_count for n in names):
        msg = f"{where}: the batch has rows with a null locator; every row needs one"
        raise SidecarError(msg)


def _locator_names(
    batch: pa.RecordBatch, columns: MetadataColumns, what: str, remedy: str
) -> list[str]:
    """The locator columns' names, once ``batch`` has all three.

    Raises:
        SidecarError: ``what`` has no ... (the missing columns); ``remedy``.
    """
    names = [columns.source_topic, columns.source_partition, columns.source_offset]
    missing = [n for n in names if n not in batch.schema.names]
    if missing:
        msg = f"{what} has no {', '.join(f'`{m}`' for m in missing)}; {remedy}"
        raise SidecarError(msg)
    return names


def _locator(batch: pa.RecordBatch, columns: MetadataColumns, row: int) -> str:
    topic = batch.column(columns.source_topic)[row].as_py()
    partition = batch.column(columns.source_partition)[row].as_py()
    offset = batch.column(columns.source_offset)[row].as_py()
    return f"{topic}:{partition}@{offset}"


def _run_starts(reply: pa.RecordBatch, names: list[str]) -> np.ndarray:
    """Per reply row, whether its locator differs from the row before (row 0: True)."""
    n = reply.num_rows
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
    for name in names:
        col = reply.column(name)
        if n > 1:
            differs = pc.not_equal(col.slice(1), col.slice(0, n - 1))
            change[1:] |= differs.to_numpy(zero_copy_only=False)
    return change


def _first_mismatch(request: pa.RecordBatch, starts: pa.RecordBatch, names: list[str]) -> int:
    n = min(request.num_rows, starts.num_rows)
    bad = np.zeros(n, dtype=bool)
    for name in names:
        bad |= pc.not_equal(
            request.column(name).slice(0, n), starts.column(name).slice(0, n)
        ).to_numpy(zero_copy_only=False)
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else n


def checked_reply(
    request: pa.RecordBatch,
    reply: pa.RecordBatch,
    columns: MetadataColumns,
    *,
    rows: RowMapping,
    where: str,
) -> pa.RecordBatch:
    """The reply with the request's metadata columns, once its locators check out.

    Args:
        request: What was sent (with its locator columns; :func:`require_locators`).
        reply: What the sidecar answered.
        columns: The metadata column names.
        rows: ``"one_to_one"`` or ``"one_to_many"`` (see the module).
        where: Who messages name (``flight_transform `score` at grpc://...``).

    Raises:
        SidecarError: A locator column missing from the reply, a row dropped, reordered
            or invented, or a metadata column rewritten.
    """
    names = _locator_names(
        reply,
        columns,
        f"{where}: the reply",
        "a sidecar must return the request's `_twg_` locator columns with each row (append "
        "its columns to the batch it got)",
    )
    for name in names:
        if reply.column(name).type != request.column(name).type:
            reply = reply.set_column(
                reply.schema.get_field_index(name),
                name,
                reply.column(name).cast(request.column(name).type),
            )
    if any(reply.column(n).null_count for n in names):
        msg = f"{where}: the reply has rows with a null locator; return each row's locator"
        raise SidecarError(msg)
    if rows == "one_to_one" and reply.num_rows == request.num_rows:
        start_mask = np.ones(reply.num_rows, dtype=bool)
    else:
        start_mask = _run_starts(reply, names)
    starts = reply.filter(pa.array(start_mask))
    if rows == "one_to_one" and reply.num_rows != request.num_rows:
        what = "fewer" if reply.num_rows < request.num_rows else "more"
        msg = (
            f"{where}: expected one reply row per request row ({request.num_rows}); got "
            f"{reply.num_rows} ({what}); a sidecar must not drop or add rows (use "
            "rows='one_to_many' for a sidecar that expands each row into several)"
        )
        raise SidecarError(msg)
    bad = _first_mismatch(request, starts, names)
    if bad < request.num_rows or starts.num_rows != request.num_rows:
        if bad < min(request.num_rows, starts.num_rows):
            got = _locator(starts, columns, bad)
            problem = f"request row {bad} is `{_locator(request, columns, bad)}`; got `{got}`"
        elif starts.num_rows < request.num_rows:
            problem = f"request row {bad} (`{_locator(request, columns, bad)}`) has no reply row"
        else:
            problem = (
                f"reply has rows after the last request row (`{_locator(starts, columns, bad)}`)"
            )
        msg = (
            f"{where}: the reply dropped, reordered or invented rows: {problem}; a sidecar "
            "must answer every row, in the order it got them, with its locator"
        )
        raise SidecarError(msg)
    return _with_request_metadata(request, reply, start_mask, columns, where)


def _with_request_metadata(
    request: pa.RecordBatch,
    reply: pa.RecordBatch,
    start_mask: np.ndarray,
    columns: MetadataColumns,
    where: str,
) -> pa.RecordBatch:
    whole = bool(start_mask.all())
    index = None if whole else pa.array(np.cumsum(start_mask) - 1, pa.int64())
    # The reply's own columns first, then the request's metadata columns (as decode does).
    arrays = [
        reply.column(i) for i, f in enumerate(reply.schema) if not columns.is_reserved(f.name)
    ]
    fields = [f for f in reply.schema if not columns.is_reserved(f.name)]
    request_names = set(request.schema.names)
    invented = [n for n in reply.schema.names if columns.is_reserved(n) and n not in request_names]
    if invented:
        msg = (
            f"{where}: the reply has metadata column(s) {', '.join(f'`{n}`' for n in invented)} "
            "the request did not; a sidecar must not add `_twg_` columns"
        )
        raise SidecarError(msg)
    reply_names = set(reply.schema.names)
    for field in request.schema:
        if not columns.is_reserved(field.name):
            continue
        column = request.column(field.name)
        expected = column if index is None else column.take(index)
        if field.name in reply_names:
            got = reply.column(field.name)
            if got.type != expected.type or not got.equals(expected):
                msg = (
                    f"{where}: the reply changed metadata column `{field.name}`; a sidecar "
                    "must return the `_twg_` columns it got unchanged (or leave them out)"
                )
                raise SidecarError(msg)
        arrays.append(expected)
        fields.append(field)
    # The request's schema metadata (an input span a sink covers) goes with the rows.
    schema = pa.schema(fields, metadata=request.schema.metadata)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
