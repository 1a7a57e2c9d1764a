"""Private: what one PostgreSQL sink shard staged this epoch, and the transaction writing it.

:class:`StagedEpoch` buffers the epoch's rows as Arrow (cast to the table's types) and,
per source partition, the spans staged (never a hole between two: rows refused on another
shard). :meth:`StagedEpoch.write` is one attempt at the epoch's transaction: lock the
coverage rows of the epoch's source partitions, bulk-load the rows (ADBC COPY; for
upserts into a temporary table, then ``INSERT … ON CONFLICT … DO UPDATE``), write the
new coverage, ``COMMIT``. A partition whose spans the coverage already holds was
committed by an attempt whose answer was lost: its rows are not loaded again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax import _faults
from thalweg_bytewax.coverage.spans import OffsetCoverage

from . import _coverage as cov
from ._upsert import upsert

if TYPE_CHECKING:
    from ._table import PostgresTable

__all__ = ["StagedEpoch"]

logger = logging.getLogger("thalweg_bytewax.connectors.postgres._partition")


class _Pending:
    """What one source partition staged since the last commit."""

    __slots__ = ("partition", "staged", "topic")

    def __init__(self, topic: str, partition: int, first: int, last: int) -> None:
        self.topic = topic
        self.partition = partition
        # Each staged group's span, never a hole between two (rows refused on another
        # shard): the coverage row claims only these.
        self.staged = OffsetCoverage([(first, last)])

    def add(self, first: int, last: int) -> None:
        """Note a further staged group at ``first..last``."""
        self.staged = self.staged.add(first, last)


class StagedEpoch:
    """The rows one shard staged since its last commit, and their source spans.

    Args:
        pg: The sink's table.
        temp: The name of this shard's temporary table for upserts.
    """

    def __init__(self, pg: PostgresTable, temp: str) -> None:
        self._pg = pg
        self._temp = temp
        self._staged: list[pa.Table] = []
        self._pending: dict[str, _Pending] = {}
        self._unlocated = False  # rows without a locator staged this epoch

    @property
    def empty(self) -> bool:
        """Whether nothing was staged since the last commit."""
        return not self._pending and not self._unlocated

    def add(
        self, key: str, table: pa.Table, topic: str, partition: int, first: int, last: int
    ) -> None:
        """Stage rows of source partition ``key`` at offsets ``first..last``."""
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = _Pending(topic, partition, first, last)
        else:
            pending.add(first, last)
        self._staged.append(table)

    def add_unlocated(self, table: pa.Table) -> None:
        """Stage rows without a source locator (no coverage rows)."""
        self._staged.append(table)
        self._unlocated = True

    def clear(self) -> None:
        """Drop what is staged (after a commit, or when the epoch is aborted)."""
        self._staged.clear()
        self._pending.clear()
        self._unlocated = False

    def write(self, conn: Any) -> None:
        """One attempt at the epoch's transaction on ``conn`` (in the call's thread)."""
        sink = self._pg
        cur = conn.cursor()
        try:
            read = cov.read_sql(sink.schema, dollar=True, for_update=True)
            write = cov.write_sql(sink.schema)
            landed: set[tuple[str, int]] = set()
            updates: list[tuple[_Pending, OffsetCoverage]] = []
            for p in self._pending.values():
                cur.execute(read, (sink.sink_name, p.topic, p.partition))
                held = cov.parse(cur.fetchall())
                if any(held.uncovered(lo, hi) for lo, hi in p.staged.spans):
                    updates.append((p, held.union(p.staged)))
                else:
                    # The epoch committed before, but its answer was lost: the coverage
                    # commits with the rows, so they are in the table already.
                    landed.add((p.topic, p.partition))
            if updates or self._unlocated:
                self._load(cur, landed)
                for p, new in updates:
                    cur.execute(write, (sink.sink_name, p.topic, p.partition, cov.dump(new)))
            _faults.checkpoint("postgres.before_commit")
            conn.commit()
        finally:
            try:
                cur.close()
            except Exception:
                logger.debug("postgres sink: closing a cursor failed", exc_info=True)
        if landed:
            logger.info(
                "postgres sink `%s`: %s source partitions of the epoch were committed by an "
                "attempt whose answer was lost; not written again",
                sink.target,
                len(landed),
            )

    def _load(self, cur: Any, landed: set[tuple[str, int]]) -> None:
        """Bulk-load the buffered rows (minus partitions that landed), grouped by schema."""
        sink = self._pg
        cols = sink.columns
        groups: dict[pa.Schema, list[pa.Table]] = {}
        for staged in self._staged:
            table = staged
            if landed:
                topics, parts = table.column(cols.source_topic), table.column(cols.source_partition)
                keep = None
                for topic, part in landed:
                    hit = pc.and_(pc.equal(topics, topic), pc.equal(parts, part))
                    keep = hit if keep is None else pc.or_(keep, hit)
                table = table.filter(pc.invert(keep))
            if table.num_rows:
                groups.setdefault(table.schema, []).append(table)
        for schema, tables in groups.items():
            data = pa.concat_tables(tables).select(sink.written_columns(schema))
            if sink.mode == "append":
                cur.adbc_ingest(sink.table, data, mode="append", db_schema_name=sink.schema)
            else:
                upsert(cur, sink, self._temp, data)
