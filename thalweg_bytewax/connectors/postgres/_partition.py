"""Private: the sink partition behind ``PostgresSink`` — buffer the epoch, one transaction.

The epoch protocol (ownership, ordering, replay skipping, the failed flag) is
:class:`~thalweg_bytewax.runtime.epoch_sink.EpochSinkPartition`'s. Here ``stage()``
provisions the table for the batch's schema (once per schema), casts the rows to the
table's types and buffers them as Arrow; ``commit_epoch()`` writes the whole epoch in
one transaction on the data connection (``_epoch_write``: lock the coverage rows of the
epoch's source partitions, bulk-load the rows, write the new coverage, ``COMMIT``).

A transient failure (SQLSTATE class 08, 40001, 40P01, 57P01, …, or a server that did not
answer within ``write_timeout``) rolls back, reconnects and runs the whole transaction
again from the buffer, with bounded exponential backoff.
When a commit's answer was lost, the retry finds the epoch's spans already in the
coverage rows (they commit together with the rows) and writes nothing twice. Rows
without a locator (``locators="absent"``, key ``UNLOCATED``) have no coverage rows: they
load in the same transaction, and such a retry writes them again (at-least-once for
appends; an upsert overwrites the same keys).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import SinkTerminalError
from thalweg_bytewax.runtime.epoch_sink import UNLOCATED, EpochSinkPartition, EpochSinkState

from .._epoch_partition import TABLE_UNLOCATED_REMEDY
from . import _coverage as cov
from ._deadline import DataConnection
from ._epoch_write import StagedEpoch
from ._errors import describe_error, is_transient

if TYPE_CHECKING:
    from ._table import PostgresTable

__all__: list[str] = []

logger = logging.getLogger(__name__)


class _PostgresPartition(EpochSinkPartition):
    replay_remedy: ClassVar[str] = "write to a new table or delete its coverage rows"
    merge_remedy: ClassVar[str] = "give each stream its own table"
    unlocated_remedy: ClassVar[str] = TABLE_UNLOCATED_REMEDY

    def __init__(self, pg: PostgresTable, resume: EpochSinkState | None, shard: int) -> None:
        super().__init__(
            component=f"postgres sink `{pg.target}`",
            columns=pg.columns,
            resume_state=resume,
            shard=shard,
            shards=pg.config.shards,
            locators=pg.config.locators,
        )
        self._pg = pg
        self.target_replaces_rows = pg.mode == "upsert"
        self._epoch = StagedEpoch(pg, f"_twg_upsert_{shard}")
        # The ADBC data connection, opened on first use, each call on it bounded in time.
        self._data = DataConnection(pg.connect_data, self.component, pg.config.write_timeout)

    # -- hooks -----------------------------------------------------------------------

    @override
    def open_partition(self, key: str, topic: str, partition: int) -> OffsetCoverage:
        # Read through this shard's own data connection (opened once, kept between
        # epochs), not a new connection per source partition: a flow over hundreds of
        # partitions would otherwise open as many connections at its start.
        sink = self._pg
        sink.ensure_bookkeeping()
        holds = sink.target_at_start == "rows"

        def read(conn: Any) -> tuple[list[Any], bool]:
            still = holds
            cur = conn.cursor()
            try:
                cur.execute(
                    cov.read_sql(sink.schema, dollar=True), (sink.sink_name, topic, partition)
                )
                rows = cur.fetchall()
                check = sink.partition_check_sql()
                if rows and still and check is not None:
                    # Covered: does the table still hold a row of it? (the start check)
                    cur.execute(check, (topic, partition))
                    found = cur.fetchone()
                    still = bool(found and found[0])
            finally:
                cur.close()
            conn.rollback()  # end the read's transaction: nothing stays open between epochs
            return rows, still

        try:
            rows, holds = self._data.run(read, f"the coverage read of `{key}`")
        except Exception:
            self._data.drop()
            raise
        held = cov.parse(rows)
        if held and not holds:
            return self._target_lost_partition(key, topic, partition, held)
        return held

    def _target_lost_partition(
        self, key: str, topic: str, partition: int, held: OffsetCoverage
    ) -> OffsetCoverage:
        """Coverage of a partition the table no longer holds: refill it, or refuse.

        The table was dropped, truncated or had the partition's rows deleted while its
        coverage row stayed. Skipping by that coverage would write nothing, silently.
        Without a resume state for the partition the source replays it from where it
        starts: the stale coverage row goes (here and in the coverage store) and the
        table is refilled. With one, the source resumes past the covered offsets and
        they would never come back: refused, naming the remedy.
        """
        sink = self._pg
        span = f"{held.first}-{held.last} ({held.size:,} offsets)"
        resumed = self.resumed_offset(key)
        if resumed:
            accept = (
                sql.SQL("DELETE FROM {} WHERE sink = {} AND topic = {} AND partition = {}")
                .format(
                    sql.Identifier(sink.schema, cov.COVERAGE_TABLE),
                    sql.Literal(sink.sink_name),
                    sql.Literal(topic),
                    sql.Literal(partition),
                )
                .as_string(None)
            )
            msg = (
                f"postgres sink `{sink.target}`: the table holds no row of `{key}` (dropped, "
                f"truncated or deleted), but its coverage row in `{sink.schema}."
                f"{cov.COVERAGE_TABLE}` (sink `{sink.sink_name}`) claims offsets {span} and "
                f"the flow resumes `{key}` at offset {resumed}: the source will not replay "
                f"them, so nothing would refill the table. Nothing was written. To refill "
                f"it, start the flow without its recovery state (a fresh recovery "
                f"directory) so the source replays from its start: the sink then drops the "
                f"stale coverage and writes the table again; or write to a new table. If "
                f"the rows were deleted on purpose (retention), accept it by deleting the "
                f"coverage row: {accept}"
            )
            raise SinkTerminalError(msg)
        logger.warning(
            "postgres sink `%s`: the table holds no row of `%s` (dropped, truncated or "
            "deleted) while its coverage claimed offsets %s; the stale coverage is dropped "
            "and the table is refilled with what the source replays",
            sink.target,
            key,
            span,
        )
        self.target_lost([key])  # the store first: a crash in between leaves it lagging
        sink.forget_coverage(topic, partition)
        return OffsetCoverage()

    @override
    def stage(self, key: str, rows: pa.RecordBatch) -> None:
        if key == UNLOCATED:
            self._epoch.add_unlocated(self._pg.prepare(rows))
            return
        cols = self.columns
        offsets = rows.column(cols.source_offset)
        bounds = pc.min_max(offsets)
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        topic = rows.column(cols.source_topic)[0].as_py()
        part = rows.column(cols.source_partition)[0].as_py()
        table = self._pg.prepare(rows)  # provision for this schema, cast to the table's types
        self._epoch.add(key, table, topic, part, first, last)

    @override
    def commit_epoch(self) -> None:
        if self._epoch.empty:
            return
        sink = self._pg
        attempt = 0
        while True:
            try:
                self._data.run(self._epoch.write, "an epoch's transaction")
                break
            except SinkTerminalError:
                raise
            except Exception as exc:
                self._data.drop()
                if not is_transient(exc):
                    msg = (
                        f"postgres sink `{sink.target}`: the epoch's write failed and "
                        f"retrying cannot help ({describe_error(exc, sink.dsn)}); nothing "
                        f"of the epoch was written: fix the table or the data, then restart "
                        f"the flow (the epoch replays from the source)"
                    )
                    raise SinkTerminalError(msg) from exc
                attempt += 1
                if attempt > sink.config.max_retries:
                    msg = (
                        f"postgres sink `{sink.target}`: the epoch's transaction failed "
                        f"{attempt} times on transient errors; expected the server back "
                        f"within {sink.config.max_retries} retries; got "
                        f"{describe_error(exc, sink.dsn)} "
                        f"(check the server and restart the flow: the epoch replays from "
                        f"the source, nothing is lost)"
                    )
                    raise SinkTerminalError(msg) from exc
                wait = min(sink.config.max_backoff, sink.config.retry_backoff * 2 ** (attempt - 1))
                delay = wait.total_seconds()
                logger.warning(
                    "postgres sink `%s`: transient failure of an epoch's transaction "
                    "(attempt %s of %s, retrying in %.2f s): %s",
                    sink.target,
                    attempt,
                    sink.config.max_retries + 1,
                    delay,
                    describe_error(exc, sink.dsn),
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
                time.sleep(delay)
        self._epoch.clear()

    @override
    def abort(self) -> None:
        self._epoch.clear()
        self._data.drop()

    @override
    def release(self) -> None:
        self._data.drop()

    @override
    def held_record_ids(self, key: str, first: int, last: int) -> pa.Table | None:
        pending = self._ledger_topic(key)
        if pending is None:
            return None
        return self._pg.held_record_ids(pending[0], pending[1], first, last)

    @override
    def replaced_by_key(self, key: str, rows: pa.RecordBatch) -> np.ndarray | None:
        where = self._ledger_topic(key)
        if where is None:
            return None
        return self._pg.replaced_by_key(where[0], where[1], rows)

    @override
    def describe_target(self, key: str) -> str:
        return f"table `{self._pg.target}`"

    def _ledger_topic(self, key: str) -> tuple[str, int] | None:
        topic, _, part = key.rpartition(":")
        try:
            return topic, int(part)
        except ValueError:
            return None
