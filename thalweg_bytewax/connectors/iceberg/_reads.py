"""Private: what an Iceberg table holds of a source partition, as a resume and a replay ask.

Whether the table still holds a row of a covered partition, the record ids it holds
of an offset range, and which replayed rows an upserting table replaced by key.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import expressions as _expressions

from thalweg_bytewax.coverage.spans import replacement_verdicts

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from thalweg_bytewax.records.metadata import MetadataColumns

__all__ = ["held_record_ids", "holds_partition", "replaced_by_key"]

logger = logging.getLogger("thalweg_bytewax.connectors.iceberg._partition")

# The column that numbers the rows a key lookup asks about.
_ROW = "__twg_row"
# Offsets of a source partition one read serves key lookups over, during a replay.
_KEY_WINDOW = 100_000


def replaced_by_key(
    table: Table,
    keys: list[str],
    cols: MetadataColumns,
    key: str,
    rows: pa.RecordBatch,
    windows: dict[str, tuple[int, pa.Table]],
) -> np.ndarray | None:
    """Per row of ``rows`` (source partition ``key``), whether ``table`` replaced it by key.

    The answer is :func:`~thalweg_bytewax.coverage.replacement_verdicts`'.
    One read of the partition from the rows' lowest offset (kept in ``windows``) serves
    the replay's batches; rows it does not settle are looked up by key over the table.
    None when the key or locator columns are missing or Arrow cannot match the keys.
    """
    locator = [cols.source_topic, cols.source_partition, cols.source_offset]
    names = set(table.schema().column_names)
    if (
        not keys
        or not names.issuperset([*keys, *locator])
        or not set(keys).issubset(rows.schema.names)
    ):
        return None
    topic, _, part = key.rpartition(":")
    ex: Any = _expressions
    # A replaced row's key is held from a later offset of the same partition: one
    # read of that partition from the rows' lowest offset serves the replay's batches.
    low = pc.min(rows.column(cols.source_offset)).as_py()
    window = windows.get(key)
    if window is None or not window[0] <= low <= window[0] + _KEY_WINDOW // 2:
        held = table.scan(
            row_filter=ex.And(
                ex.EqualTo(cols.source_topic, topic),
                ex.EqualTo(cols.source_partition, int(part)),
                ex.GreaterThanOrEqual(cols.source_offset, low),
                ex.LessThan(cols.source_offset, low + _KEY_WINDOW),
            ),
            selected_fields=(*keys, *locator),
        ).to_arrow()
        window = windows[key] = (low, held)
    verdict = _key_verdicts(rows, window[1], keys, cols, topic, int(part))
    if verdict is None:
        return None  # a key type Arrow cannot match: such rows are warned about
    rest = verdict != 1
    if not rest.any():
        return verdict
    # The others by key over the whole table: an earlier row, or another source's.
    others = rows.filter(pa.array(rest))
    try:
        found = table.scan(
            row_filter=ex.In(keys[0], set(others.column(keys[0]).drop_null().to_pylist())),
            selected_fields=(*keys, *locator),
        ).to_arrow()
    except (TypeError, ValueError):
        logger.debug("iceberg sink: key lookup in %s failed", table.name(), exc_info=True)
        return None  # key values the filter cannot carry: such rows are warned about
    looked_up = _key_verdicts(others, found, keys, cols, topic, int(part))
    if looked_up is None:
        return None
    verdict[rest] = looked_up
    return verdict


def _key_verdicts(
    rows: pa.RecordBatch,
    found: pa.Table,
    keys: list[str],
    cols: MetadataColumns,
    topic: str,
    partition: int,
) -> np.ndarray | None:
    """:func:`replacement_verdicts` of ``rows``, matched to the table's rows ``found`` by key.

    None when Arrow cannot match the key columns' types.
    """
    asked = pa.table({k: rows.column(k) for k in keys}).append_column(
        _ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64))
    )
    try:
        asked = asked.cast(
            pa.schema([found.schema.field(k) for k in keys] + [asked.schema.field(_ROW)])
        )
        joined = asked.join(found, keys=keys, join_type="inner", use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    offsets = rows.column(cols.source_offset)
    return replacement_verdicts(offsets, joined.column(_ROW), joined, cols, topic, partition)


def holds_partition(
    table: Table,
    cols: MetadataColumns,
    mode: str,
    foreign_deletes: bool,
    topic: str,
    partition: int,
) -> bool:
    """Whether the table still holds a row of source partition ``topic:partition``.

    Cheap: an emptied table says so in its current snapshot's summary
    (``total-records``), and a table whose ancestry holds no snapshot of another
    writer that removed rows (a ``delete`` or ``overwrite`` without this sink's
    commit id) lost nothing. Otherwise, in ``append`` mode, where every covered
    partition left a row, the partition is looked up by its locator with a one-row
    scan. An upsert table may have replaced all of a partition's rows by key, so
    there only the table as a whole is judged.
    """
    snapshot = table.current_snapshot()
    if snapshot is None:
        return False
    summary: Any = snapshot.summary
    total = summary.additional_properties.get("total-records") if summary else None
    if total is not None and str(total) == "0":
        return False
    if not foreign_deletes:
        return True  # no snapshot of another writer ever removed rows: nothing lost
    names = set(table.schema().column_names)
    if mode != "append" or not {cols.source_topic, cols.source_partition} <= names:
        return True
    ex: Any = _expressions
    found = table.scan(
        row_filter=ex.And(
            ex.EqualTo(cols.source_topic, topic),
            ex.EqualTo(cols.source_partition, partition),
        ),
        selected_fields=(cols.source_partition,),
        limit=1,
    ).to_arrow()
    return bool(found.num_rows > 0)


def held_record_ids(
    table: Table, cols: MetadataColumns, key: str, first: int, last: int
) -> pa.Table | None:
    """The ``(offset, record id)`` pairs ``table`` holds of ``key`` in ``first..last``."""
    names = set(table.schema().column_names)
    needed = (cols.source_topic, cols.source_partition, cols.source_offset, cols.record_id)
    if not names.issuperset(needed):
        return None
    topic, _, part = key.rpartition(":")
    # pyiceberg's predicates are pydantic models whose positional constructors its
    # stubs do not describe; the calls are the documented ones.
    ex: Any = _expressions
    found = table.scan(
        row_filter=ex.And(
            ex.EqualTo(cols.source_topic, topic),
            ex.EqualTo(cols.source_partition, int(part)),
            ex.GreaterThanOrEqual(cols.source_offset, first),
            ex.LessThanOrEqual(cols.source_offset, last),
        ),
        selected_fields=(cols.source_offset, cols.record_id),
    ).to_arrow()
    return found
