"""Lineage through cardinality changes: derived rows keep the locator of their origin.

A SQL node's output is attached to the records it came from, columnar (one ``take``
per locator column, no loop per row), from the hidden row numbers the query carried
through (see ``sql._transform``):

* **row-preserving and filtering** queries: each output row gets the topic, partition,
  offset and record id of its input row;
* **multiplying** queries (``unnest``, row generators): each derived row keeps its
  parent's locator and record id, and ``<prefix>derived_ordinal`` (int32, from 0) numbers
  the rows derived from one parent, so (offset, ordinal) is unique. A batch never splits
  an offset and the SQL runs per batch, so a replay reproduces all rows of an offset
  together, and a sink that covers an offset covers all of its derived rows;
* **aggregates**: each output row gets the topic, partition and offset of its last
  contributor (the highest offset, as the batch is in offset order), a null record id
  (an aggregate is not one record: the sinks' replay check does not compare it), and
  ``<prefix>contributor_offsets`` (list<int64>), the offsets of all contributors. The
  batch is one source partition, so the output's coverage is the union of those offsets,
  which the sink covers by its range.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataColumns

__all__ = [
    "attach_aggregate_lineage",
    "attach_row_lineage",
    "contributor_offsets_column",
    "derived_ordinal_column",
    "derived_ordinals",
    "drop_hidden",
    "locator_columns",
]


def derived_ordinal_column(columns: MetadataColumns = DEFAULT_COLUMNS) -> str:
    """The name of the derived-row ordinal column, e.g. ``_twg_derived_ordinal``."""
    return f"{columns.prefix}derived_ordinal"


def contributor_offsets_column(columns: MetadataColumns = DEFAULT_COLUMNS) -> str:
    """The name of an aggregate row's contributors column, ``_twg_contributor_offsets``."""
    return f"{columns.prefix}contributor_offsets"


def locator_columns(columns: MetadataColumns = DEFAULT_COLUMNS) -> tuple[str, ...]:
    """The columns lineage keeps: topic, partition, offset and record id."""
    return (
        columns.source_topic,
        columns.source_partition,
        columns.source_offset,
        columns.record_id,
    )


def derived_ordinals(rows: pa.Array | pa.ChunkedArray) -> pa.Array:
    """For each row, how many earlier rows share its parent row number (int32, from 0).

    Columnar: a stable sort by parent, the position within each run, scattered back.
    """
    parents = np.asarray(rows.to_numpy(zero_copy_only=False), dtype=np.int64)
    n = len(parents)
    if n == 0:
        return pa.array([], pa.int32())
    order = np.argsort(parents, kind="stable")
    ranked = parents[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = ranked[1:] != ranked[:-1]
    position = np.arange(n, dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(starts, position, 0))
    out = np.empty(n, dtype=np.int32)
    out[order] = (position - run_start).astype(np.int32)
    return pa.array(out)


def _set(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    idx = table.schema.get_field_index(name)
    if idx >= 0:
        return table.set_column(idx, pa.field(name, values.type), values)
    return table.append_column(pa.field(name, values.type), values)


def drop_hidden(table: pa.Table, *hidden: str) -> pa.Table:
    """``table`` without the columns named ``hidden`` (a ``SELECT *`` may repeat them)."""
    keep = [i for i, n in enumerate(table.column_names) if n not in hidden]
    return table.select(keep) if len(keep) < table.num_columns else table


def attach_row_lineage(
    table: pa.Table,
    source: pa.RecordBatch,
    *,
    row: str,
    columns: MetadataColumns = DEFAULT_COLUMNS,
    ordinal: bool = False,
) -> pa.Table:
    """Give each output row its input row's locator, by the row numbers in ``row``.

    Args:
        table: The query output, with the row-number column ``row`` last.
        source: The input batch (row ``i`` has row number ``i``).
        row: The row-number column (dropped from the result, with any duplicates).
        columns: The metadata column names.
        ordinal: Add the derived-row ordinal (for queries that may multiply rows).
    """
    rows = table.column(table.num_columns - 1)
    out = drop_hidden(table, row)
    for name in locator_columns(columns):
        if name in source.schema.names:
            out = _set(out, name, pc.take(source.column(name), rows))
    if ordinal:
        out = _set(out, derived_ordinal_column(columns), derived_ordinals(rows))
    return out


def attach_aggregate_lineage(
    table: pa.Table,
    source: pa.RecordBatch,
    *,
    row: str,
    rows: str,
    columns: MetadataColumns = DEFAULT_COLUMNS,
) -> pa.Table:
    """Give each aggregate row its last contributor's locator and all contributors' offsets.

    Args:
        table: The query output, with ``row`` (last contributor) and ``rows`` (all).
        source: The input batch.
        row: The last-contributor row-number column.
        rows: The list-of-contributors column.
        columns: The metadata column names.
    """
    last = table.column(table.num_columns - 2).combine_chunks()
    every = table.column(table.num_columns - 1).combine_chunks()
    out = drop_hidden(table, row, rows)
    if last.null_count:
        # A global aggregate over rows a WHERE removed (a count of 0) has no contributor
        # and no locator: it is dropped, as the input it summarises is empty.
        keep = pc.is_valid(last)
        out, last, every = out.filter(keep), last.filter(keep), every.filter(keep)
    for name in locator_columns(columns)[:3]:
        if name in source.schema.names:
            out = _set(out, name, pc.take(source.column(name), last))
    if columns.record_id in source.schema.names:
        rid_type = source.schema.field(columns.record_id).type
        out = _set(out, columns.record_id, pa.nulls(out.num_rows, rid_type))
    if columns.source_offset in source.schema.names:
        offsets = pc.take(source.column(columns.source_offset), every.flatten())
        bounds = pc.subtract(every.offsets, every.offsets[0])
        listed = pa.ListArray.from_arrays(bounds, offsets.cast(pa.int64()))
        out = _set(out, contributor_offsets_column(columns), listed)
    return out
