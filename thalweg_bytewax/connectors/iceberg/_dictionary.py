"""Private: which columns of a write-behind data file keep Parquet dictionary encoding.

Parquet's dictionary pays on a column with few distinct values; on a column of nearly
all distinct values (ids, offsets, amounts, timestamps) it only costs: every value is
hashed, and once the dictionary reaches its size limit (Iceberg's
``write.parquet.dict-size-bytes``, 2 MiB) the column falls back to plain anyway. The
fallback is per row group, so a file of several row groups (what the write-behind
encoder writes) hashes such a column once more per row group. :func:`dictionary_columns`
samples the first rows of a file's first row group and leaves a top-level column of
(nearly) all distinct values without a dictionary; every other column keeps it.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["DISTINCT_RATIO", "SAMPLE_ROWS", "dictionary_columns"]

SAMPLE_ROWS = 16_384
"""Rows sampled from a file's first row group; a smaller one keeps every dictionary."""

DISTINCT_RATIO = 0.95
"""Share of distinct values among a sample's non-null ones above which a column is
written plain (a column of 50k distinct values in 1M rows samples ~0.86 and keeps it)."""


def dictionary_columns(rows: pa.Table) -> list[str] | None:
    """The Parquet column paths to dictionary-encode, for ``use_dictionary``.

    Args:
        rows: The file's first row group, in the file's schema.

    Returns:
        Every leaf column path but those of top-level columns whose first
        :data:`SAMPLE_ROWS` rows are more than :data:`DISTINCT_RATIO` distinct; None
        (dictionary everywhere, Parquet's default) when ``rows`` are fewer than that or
        no column is that distinct.
    """
    if rows.num_rows < SAMPLE_ROWS:
        return None
    sample = rows.slice(0, SAMPLE_ROWS)
    plain = {
        field.name
        for field, column in zip(sample.schema, sample.columns, strict=True)
        if _mostly_distinct(field, column)
    }
    if not plain:
        return None
    return [path for path in _leaf_paths(rows.schema) if path not in plain]


def _mostly_distinct(field: pa.Field, column: pa.ChunkedArray) -> bool:
    if pa.types.is_nested(field.type) or pa.types.is_boolean(field.type):
        return False
    values = SAMPLE_ROWS - column.null_count
    if values < SAMPLE_ROWS // 2:
        return False
    try:
        distinct = pc.count_distinct(column).as_py()
    except pa.ArrowNotImplementedError:  # a type without a hash kernel: keep Parquet's default
        return False
    return bool(distinct > DISTINCT_RATIO * values)


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """The Parquet leaf column paths of ``schema`` (a nested column has several)."""
    if not any(pa.types.is_nested(field.type) for field in schema):
        return list(schema.names)
    buffer = io.BytesIO()
    pq.write_table(schema.empty_table(), buffer)
    parquet_schema = pq.ParquetFile(buffer).schema
    return [parquet_schema.column(i).path for i in range(len(parquet_schema))]
