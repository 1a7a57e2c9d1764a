"""A batch's input span: the source offsets a batch was made from, carried in its schema.

A sink downstream of decoding and validation sees only the clean rows; the offsets
rejected upstream (sent to the DLQ) are missing from its batches. So that its coverage
is gap-aware — a sink that skipped rejected records still covers them — an operator
that drops rows of a batch can say which input the batch stands for: the source
partition key and the first and last source offset of the batch it was made from,
as the schema metadata key ``thalweg.input_span`` (``b"orders:3@100-199"``). The
epoch-sink base then covers that whole span, not just its rows' offsets.

Schema metadata is the least invasive carrier: pyarrow keeps it through ``filter``,
``take``, ``slice``, ``select``, ``append_column`` and ``set_column``, so the operators
that only drop rows (validate, dedup, drop rules) carry it without a change, while
anything that builds new batches (SQL, windows, aggregations) drops it, which makes the
sink fall back to the offsets of its rows (coverage then lags, never leads). Only
decode sets it today. An operator that holds rows back to emit them later must not pass
the span on with the rows it emits first.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.records.uniform import all_equal

__all__ = [
    "INPUT_SPAN_KEY",
    "input_span",
    "input_span_metadata",
    "with_input_span",
    "without_input_span",
]

INPUT_SPAN_KEY = b"thalweg.input_span"
"""The schema metadata key: ``b"<topic>:<partition>@<first>-<last>"``."""


def _encode(key: str, first: int, last: int) -> bytes:
    return f"{key}@{first}-{last}".encode()


def with_input_span(batch: pa.RecordBatch, key: str, first: int, last: int) -> pa.RecordBatch:
    """``batch`` marked as standing for offsets ``first..last`` of source partition ``key``.

    Args:
        batch: The batch (its data is not copied).
        key: The source partition key, e.g. ``"orders:3"``.
        first: The first source offset of the input batch.
        last: The last source offset of the input batch.
    """
    meta = dict(batch.schema.metadata or {})
    meta[INPUT_SPAN_KEY] = _encode(key, first, last)
    return batch.replace_schema_metadata(meta)


def input_span(batch: pa.RecordBatch) -> tuple[str, int, int] | None:
    """The ``(key, first, last)`` a batch stands for, or None when it carries no span.

    A malformed value counts as none: the sink then covers only its rows' offsets.
    """
    meta = batch.schema.metadata
    raw = meta.get(INPUT_SPAN_KEY) if meta else None
    if raw is None:
        return None
    key, sep, bounds = raw.decode("utf-8", "replace").rpartition("@")
    lo, dash, hi = bounds.partition("-")
    if not sep or not dash or not lo.isdigit() or not hi.isdigit() or int(lo) > int(hi):
        return None
    return key, int(lo), int(hi)


def without_input_span(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without the span key (the rest of its metadata kept)."""
    meta = batch.schema.metadata
    if not meta or INPUT_SPAN_KEY not in meta:
        return batch
    rest = {k: v for k, v in meta.items() if k != INPUT_SPAN_KEY}
    return batch.replace_schema_metadata(rest or None)


def input_span_metadata(raw: pa.RecordBatch, columns: MetadataColumns) -> dict[bytes, bytes] | None:
    """The schema metadata naming the span of a raw batch of one source partition.

    None when the batch is empty, lacks the locator columns, has null locators, or
    mixes source partitions (then no span is claimed).

    Args:
        raw: A RawBatch (one poll of one source partition).
        columns: The metadata column names.
    """
    names = raw.schema.names
    t, p, o = columns.source_topic, columns.source_partition, columns.source_offset
    if raw.num_rows == 0 or t not in names or p not in names or o not in names:
        return None
    topics, parts, offsets = raw.column(t), raw.column(p), raw.column(o)
    if topics.null_count or parts.null_count or offsets.null_count:
        return None
    t0, p0 = topics[0].as_py(), parts[0].as_py()
    if not (all_equal(parts) and all_equal(topics)):
        return None
    bounds = pc.min_max(offsets)
    first, last = bounds["min"].as_py(), bounds["max"].as_py()
    if first < 0:
        return None
    return {INPUT_SPAN_KEY: _encode(f"{t0}:{p0}", first, last)}
