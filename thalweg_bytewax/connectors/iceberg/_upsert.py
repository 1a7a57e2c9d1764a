"""Private: an epoch's upsert by key that reads back only the keys it may replace.

pyiceberg's ``Transaction.upsert`` reads the table back with a filter of one branch per
key of the batch (``status = 'paid' AND window_start = ...`` or'ed together), binds that
filter three times and evaluates it against every data file, then deletes the changed
keys and appends the rest: its cost grows with the batch's keys times the table's files.
A window's results are new keys nearly always (a window is emitted once; only a replay or
a late record emits it again). :func:`upsert` reads back the key columns of the rows
whose most varied key column holds one of the batch's values (one ``IN`` predicate),
matches the keys in Arrow, and then appends the batch when the table holds none of its
keys, or deletes the keys it holds and appends the batch, in one transaction. The table
ends as pyiceberg's upsert leaves it: each key once, with the batch's row. A batch with
a null key, or keys Arrow cannot match, goes through pyiceberg's upsert as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import expressions as _expressions
from pyiceberg.table import DataScan
from pyiceberg.table.upsert_util import create_match_filter

if TYPE_CHECKING:
    from pyiceberg.table import Table, Transaction

__all__ = ["held_keys", "upsert"]

logger = logging.getLogger("thalweg_bytewax.connectors.iceberg._partition")


def upsert(
    tx: Transaction, table: Table, rows: pa.Table, keys: list[str], props: dict[str, str]
) -> None:
    """Stage ``rows`` (one per key) in ``tx``: replace the keys ``table`` holds, add the rest."""
    held = held_keys(tx, table, rows, keys)
    if held is None:
        tx.upsert(rows, join_cols=keys, snapshot_properties=props)
    elif held.num_rows == 0:
        tx.append(rows, snapshot_properties=props)
    else:
        tx.overwrite(
            rows, overwrite_filter=create_match_filter(held, keys), snapshot_properties=props
        )


def held_keys(tx: Transaction, table: Table, rows: pa.Table, keys: list[str]) -> pa.Table | None:
    """The distinct keys of ``rows`` the table holds (as staged in ``tx``).

    None when a key of ``rows`` is null or Arrow cannot match the key columns: the
    caller then upserts through pyiceberg.
    """
    if rows.num_rows == 0 or any(rows.column(k).null_count for k in keys):
        return None
    column = max(keys, key=lambda k: pc.count_distinct(rows.column(k)).as_py())
    values = pc.unique(rows.column(column)).to_pylist()
    ex: Any = _expressions
    scan = DataScan(
        table_metadata=tx.table_metadata,
        io=table.io,
        row_filter=ex.In(column, values) if len(values) > 1 else ex.EqualTo(column, values[0]),
        selected_fields=tuple(keys),
    )
    found = scan.to_arrow()
    asked = rows.select(keys).group_by(keys).aggregate([])
    if found.num_rows == 0:
        return asked.slice(0, 0)
    try:
        found = found.select(keys).cast(asked.schema).group_by(keys).aggregate([])
        return asked.join(found, keys=keys, join_type="left semi", use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        logger.debug("iceberg sink: key match in %s failed", table.name(), exc_info=True)
        return None
