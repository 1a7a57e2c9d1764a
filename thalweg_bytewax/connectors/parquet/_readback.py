"""Private: the ``(offset, record id)`` pairs a Parquet lane's finalized files hold.

What a replay is checked against (:meth:`~thalweg_bytewax.runtime.epoch_sink.
EpochSinkPartition.held_record_ids`): only the files of the range are read, and only the
offset and record-id columns, filtered to the range.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from thalweg_bytewax.records import RECORD_ID_BYTES
from thalweg_bytewax.records.metadata import MetadataColumns

from ..raw_lane._store import LaneStore
from ._stream import TopicPartitionStream

__all__ = ["held_record_ids"]


def held_record_ids(
    store: LaneStore,
    stream: TopicPartitionStream,
    columns: MetadataColumns,
    first: int,
    last: int,
) -> pa.Table | None:
    """The offsets and record ids the stream's finalized files hold in ``first..last``.

    None when no listed file overlaps the range (covered by the resume state only: files
    removed by retention). Rows written without a record id get a null one: they are
    checked by offset only.
    """
    off, rid = columns.source_offset, columns.record_id
    names = [name for lo, hi, name in stream.files if lo <= last and hi >= first]
    if not names:
        return None
    tables = []
    for name in names:
        path = store.child(stream.directory, name)
        held = pq.read_schema(path, filesystem=store.fs).names
        table = pq.read_table(
            path,
            columns=[off, rid] if rid in held else [off],
            filesystem=store.fs,
            filters=[(off, ">=", first), (off, "<=", last)],
        )
        if rid not in held:
            table = table.append_column(rid, pa.nulls(table.num_rows, pa.binary(RECORD_ID_BYTES)))
        tables.append(table)
    return pa.concat_tables(tables)
