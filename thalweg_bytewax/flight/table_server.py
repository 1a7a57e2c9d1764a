"""A reference Flight server that stores what a ``FlightSink`` sends and serves it back.

It implements :mod:`thalweg_bytewax.flight.protocol`: DoPut stores the rows of a stream
at each confirm (one Arrow IPC stream file per source partition and batch sent, written,
fsynced and renamed under ``<first>-<last>.arrows`` before the answer goes out), skips
rows whose locator it already holds, and drops rows that were never confirmed when a
stream breaks; DoAction ``twg.held`` answers the spans held and ``twg.held_ids`` the
record ids over an offset range. ``GetFlightInfo`` on
``FlightDescriptor.for_path(target)`` lists one endpoint per stored source partition and
DoGet streams its rows in offset order: what a
:class:`~thalweg_bytewax.connectors.flight.FlightSource` reads.

Start it for a test or a trial with ``TableServer(root).serve_in_thread()``; a real
target (a feature store, a service's database) implements the same few calls.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pyarrow.ipc as ipc
from typing_extensions import override

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.flight._local_server import LocalFlightServer
from thalweg_bytewax.flight.protocol import (
    HELD_ACTION,
    HELD_IDS_ACTION,
    HELD_IDS_SCHEMA,
    held_ids_answer,
)
from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.system.durable import fsync_path

__all__ = ["TableServer", "read_held"]

logger = logging.getLogger(__name__)

_SUFFIX = ".arrows"


def read_held(
    root: str | os.PathLike[str],
    target: str,
    topic: str,
    partition: int,
    columns: MetadataColumns = DEFAULT_COLUMNS,
) -> pa.Table | None:
    """Every row a table server under ``root`` holds for a source partition, by offset.

    Reads the files directly (another process's, too); None when none are held.
    """
    directory = Path(root) / target / topic / str(partition)
    files = sorted(directory.glob(f"*{_SUFFIX}")) if directory.is_dir() else []
    tables = [ipc.open_stream(pa.memory_map(str(f))).read_all() for f in files]
    if not tables:
        return None
    table = pa.concat_tables(tables, promote_options="default")
    return table.sort_by(columns.source_offset)


class TableServer(LocalFlightServer):
    """Store confirmed rows per (target, topic, partition) under ``root``; serve them back.

    Args:
        root: The directory the rows are kept in (``<target>/<topic>/<partition>/``).
        location: Where to listen; port 0 picks a free one (read :attr:`port`).
        confirm_delay: How long each confirm waits before answering (a slow durable
            write, for benchmarks).
        columns: The metadata column names (the prefix).
    """

    thread_name = "twg-table-server"

    def __init__(
        self,
        root: str | os.PathLike[str],
        location: str = "grpc://127.0.0.1:0",
        *,
        confirm_delay: timedelta = timedelta(0),
        columns: MetadataColumns = DEFAULT_COLUMNS,
    ) -> None:
        super().__init__(location)
        self.root = Path(root)
        self.columns = columns
        self.confirm_delay_s = confirm_delay.total_seconds()
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()  # cleared by `stall()`: DoPut stops reading until `resume()`
        self.confirms = 0
        """Confirms answered."""
        self.rows_stored = 0
        """Rows stored (replays skipped by locator are not counted)."""
        self.rows_skipped = 0
        """Rows skipped because their locator was held."""

    def stall(self) -> None:
        """Stop reading DoPut streams (a stuck server), until :meth:`resume`."""
        self._running.clear()

    def resume(self) -> None:
        """Read DoPut streams again after :meth:`stall`."""
        self._running.set()

    # -- storage -----------------------------------------------------------------------

    def _dir(self, target: str, topic: str, partition: int) -> Path:
        for name in (target, topic):
            if not name or "/" in name or name.startswith("."):
                msg = f"table server: expected a plain name; got {name!r}"
                raise flight.FlightServerError(msg)
        return self.root / target / topic / str(partition)

    def held(self, target: str, topic: str, partition: int) -> OffsetCoverage:
        """The offsets held for one source partition of ``target``."""
        directory = self._dir(target, topic, partition)
        spans = []
        if directory.is_dir():
            for path in directory.glob(f"*{_SUFFIX}"):
                first, _, last = path.stem.partition("-")
                spans.append((int(first), int(last)))
        return OffsetCoverage(spans)

    def read(self, target: str, topic: str, partition: int) -> pa.Table | None:
        """Every row held for one source partition, in offset order (None: none held)."""
        self._dir(target, topic, partition)  # a plain name, checked
        return read_held(self.root, target, topic, partition, self.columns)

    def _store(self, target: str, batches: list[pa.RecordBatch]) -> None:
        if not batches:
            return
        cols = self.columns
        # One file per batch sent, not one per burst: a file's name is the span it holds,
        # and a burst's first-to-last span would claim the offsets between two batches
        # (rows another shard refused, say), which a resumed sink would then skip as held.
        for batch in batches:
            table = pa.Table.from_batches([batch])
            topic_col = table.column(cols.source_topic)
            for topic in pc.unique(topic_col).to_pylist():
                of_topic = table.filter(pc.equal(topic_col, topic))
                partitions = of_topic.column(cols.source_partition)
                for partition in pc.unique(partitions).to_pylist():
                    mine = of_topic.filter(pc.equal(partitions, partition))
                    self._store_partition(target, topic, partition, mine)

    def _store_partition(self, target: str, topic: str, partition: int, mine: pa.Table) -> None:
        cols = self.columns
        with self._lock:
            held = self.held(target, topic, partition)
            fresh = mine.filter(~held.mask(mine.column(cols.source_offset)))
            self.rows_skipped += mine.num_rows - fresh.num_rows
            if fresh.num_rows:
                self._write(self._dir(target, topic, partition), fresh)
                self.rows_stored += fresh.num_rows

    def _write(self, directory: Path, rows: pa.Table) -> None:
        bounds = pc.min_max(rows.column(self.columns.source_offset))
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / f".staging-{uuid.uuid4().hex}"
        with open(staging, "wb") as f:
            with ipc.new_stream(f, rows.schema) as writer:
                writer.write_table(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staging, directory / f"{first:020d}-{last:020d}{_SUFFIX}")
        fsync_path(directory)

    # -- Flight calls ------------------------------------------------------------------

    @override
    def do_put(
        self,
        context: Any,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        target = descriptor.path[0].decode()
        pending: list[pa.RecordBatch] = []
        while True:
            self._running.wait()
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            if chunk.data is not None and chunk.data.num_rows:
                pending.append(chunk.data)
            if chunk.app_metadata is None:
                continue
            request = json.loads(bytes(chunk.app_metadata))
            self._store(target, pending)
            pending.clear()
            if self.confirm_delay_s:
                time.sleep(self.confirm_delay_s)
            self.confirms += 1
            writer.write(pa.py_buffer(json.dumps({"confirmed": request["confirm"]}).encode()))
        if pending:  # never confirmed: the sink sends these rows again after a restart
            logger.info("table server: dropped %d unconfirmed batches", len(pending))

    @override
    def do_action(self, context: Any, action: flight.Action) -> Iterator[flight.Result]:
        if action.type not in (HELD_ACTION, HELD_IDS_ACTION):
            msg = (
                f"table server: unknown action {action.type!r}; expected "
                f"{HELD_ACTION!r} or {HELD_IDS_ACTION!r}"
            )
            raise flight.FlightServerError(msg)
        body = json.loads(action.body.to_pybytes())
        target, topic, partition = body["target"], body["topic"], int(body["partition"])
        if action.type == HELD_IDS_ACTION:
            yield held_ids_answer(
                self.held_ids(target, topic, partition, int(body["first"]), int(body["last"]))
            )
            return
        held = self.held(target, topic, partition)
        yield flight.Result(json.dumps({"spans": held.to_list()}).encode())

    def held_ids(self, target: str, topic: str, partition: int, first: int, last: int) -> pa.Table:
        """The ``offset`` and ``record_id`` of every row held at offsets ``first..last``."""
        cols = self.columns
        table = self.read(target, topic, partition)
        if table is None:
            return HELD_IDS_SCHEMA.empty_table()
        offsets = table.column(cols.source_offset)
        table = table.filter(
            pc.and_(pc.greater_equal(offsets, first), pc.less_equal(offsets, last))
        )
        ids = (
            table.column(cols.record_id)
            if cols.record_id in table.column_names
            else pa.nulls(table.num_rows, pa.binary(16))
        )
        return pa.table([table.column(cols.source_offset), ids], schema=HELD_IDS_SCHEMA)

    @override
    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return [
            (HELD_ACTION, "offsets held for one source partition"),
            (HELD_IDS_ACTION, "record ids held over an offset range of one source partition"),
        ]

    @override
    def get_flight_info(
        self, context: Any, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        target = descriptor.path[0].decode()
        endpoints, schema = [], pa.schema([])
        base = self.root / target
        for topic_dir in sorted(base.iterdir()) if base.is_dir() else []:
            for part_dir in sorted(topic_dir.iterdir(), key=lambda p: int(p.name)):
                table = self.read(target, topic_dir.name, int(part_dir.name))
                if table is None:
                    continue
                schema = table.schema
                ticket = json.dumps(
                    {"target": target, "topic": topic_dir.name, "partition": int(part_dir.name)}
                )
                endpoints.append(flight.FlightEndpoint(ticket.encode(), []))
        return flight.FlightInfo(schema, descriptor, endpoints, -1, -1)

    @override
    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        body = json.loads(ticket.ticket)
        table = self.read(body["target"], body["topic"], int(body["partition"]))
        if table is None:
            msg = f"table server: nothing held for {body!r}"
            raise flight.FlightServerError(msg)
        return flight.RecordBatchStream(table)
