"""Read a lane back: one table of its finalized files, and its records per partition.

A lane is a directory of finalized Parquet files, as ``ParquetSink`` writes them
(``<lane>/<topic>/<partition>/<first>-<last>.parquet``). Staging files start with ``.``,
so neither these readers nor DuckDB globs ever see a file before its epoch is durable.
:func:`read_lane` is the one reader; the typed readers of the DLQ and audit lanes read
through it. Every reader takes a lane directory (a local path or a URI, with an optional
``filesystem=``) or a ``pyarrow.dataset.Dataset``. A lane directory that exists but holds
no file yet reads as an empty table of the lane's schema; a missing one raises
``FileNotFoundError``.

A lane whose schema evolved (a column added or widened mid-stream) holds files of
several schemas; :func:`read_lane` reads them as one table of their joined schema, each
value exact and NULL only in the columns a file does not hold. Files that no lossless
schema joins (written by an earlier version of the sink, or another writer) raise a
:class:`~thalweg_bytewax.errors.SchemaError` naming the files and the column.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from thalweg_bytewax.lanes._schema import file_schemas, unify_file_schemas
from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["LaneSource", "lane_stats", "lane_stats_schema", "read_lane"]

LaneSource: TypeAlias = str | os.PathLike[str] | ds.Dataset
"""A lane directory (local path or URI) or an already opened ``pyarrow.dataset.Dataset``."""

_DEFAULT_COLUMNS = MetadataColumns()


def read_lane(
    source: LaneSource,
    columns: Sequence[str] | None = None,
    *,
    schema: pa.Schema | None = None,
    filter: ds.Expression | None = None,  # noqa: A002 - pyarrow's own name
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """Read a whole lane back as one table (finalized files only).

    A lane directory reads as the join of its files' schemas (every footer is read;
    the scan reuses them): a column added mid-stream is NULL for rows written before it,
    a widened column (``int32`` files, then ``int64``) reads as the wider type, values
    exact. A ``Dataset`` passed in is read with its own schema.

    Args:
        source: The lane directory (local path or URI), or a ``pyarrow.dataset.Dataset``.
        columns: Read only these columns (default: all).
        schema: The schema of the table returned for a lane that holds no file yet
            (default: a table without columns, whatever ``columns`` asks for).
        filter: A ``pyarrow.dataset`` expression applied while reading.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``source``.

    Returns:
        The lane's rows, filtered.

    Raises:
        SchemaError: Two files of the lane hold a column in types no lossless type
            holds; the message names both files, the column and both types.
    """
    dataset = (
        source
        if isinstance(source, ds.Dataset)
        else ds.dataset(os.fspath(source), format="parquet", filesystem=filesystem)
    )
    wanted = list(columns) if columns is not None else None
    if isinstance(dataset, ds.FileSystemDataset) and not dataset.files:
        if schema is None:  # nothing to select from: a table without columns
            return pa.schema([]).empty_table()
        table = schema.empty_table()
        table = table.filter(filter) if filter is not None else table
        return table.select(wanted) if wanted is not None else table
    if not isinstance(source, ds.Dataset) and isinstance(dataset, ds.FileSystemDataset):
        dataset = _unified(os.fspath(source), dataset)
    return dataset.to_table(columns=wanted, filter=filter)


def _unified(lane: str, dataset: ds.FileSystemDataset) -> ds.FileSystemDataset:
    """``dataset`` read as the join of its files' schemas (by default it takes the first's)."""
    fragments = list(dataset.get_fragments())
    files = file_schemas(fragments)
    unified = unify_file_schemas(lane, files)
    if unified is None or all(schema.equals(dataset.schema) for _, schema in files):
        return dataset
    return ds.FileSystemDataset(fragments, unified, dataset.format, dataset.filesystem)


def lane_stats_schema() -> pa.Schema:
    """The table :func:`lane_stats` returns: one row per source topic-partition."""
    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("records", pa.int64()),
            pa.field("first_offset", pa.int64()),
            pa.field("last_offset", pa.int64()),
            pa.field("missing_offsets", pa.int64()),
        ]
    )


def lane_stats(
    source: LaneSource,
    *,
    filesystem: pafs.FileSystem | None = None,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.Table:
    """Count a lane's records per source topic-partition, with their offset range.

    Works on every lane that carries the locator columns (raw, decoded, DLQ, audit).
    ``missing_offsets`` counts the offsets between the first and the last that the lane
    does not hold — rows the flow filtered or deduplicated, or a gap to look into.

    Args:
        source: The lane directory (local path or URI), or a ``pyarrow.dataset.Dataset``.
        filesystem: A ``pyarrow.fs.FileSystem`` for ``source``.
        columns: Metadata column names (the prefix).

    Returns:
        One row per topic-partition (:func:`lane_stats_schema`), sorted.
    """
    topic, part, offset = columns.source_topic, columns.source_partition, columns.source_offset
    table = read_lane(source, [topic, part, offset], filesystem=filesystem)
    if table.num_columns == 0:  # a lane without any file yet
        return lane_stats_schema().empty_table()
    grouped = table.group_by([topic, part]).aggregate(
        [(offset, "count"), (offset, "min"), (offset, "max")]
    )
    count = grouped.column(f"{offset}_count")
    first = grouped.column(f"{offset}_min")
    last = grouped.column(f"{offset}_max")
    span = pc.add(pc.subtract(last, first), 1)
    out = pa.table(
        [
            grouped.column(topic),
            grouped.column(part),
            count,
            first,
            last,
            pc.subtract(span, count),
        ],
        schema=lane_stats_schema(),
    )
    return out.sort_by([("topic", "ascending"), ("partition", "ascending")])
