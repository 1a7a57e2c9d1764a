"""Private: one endpoint of a flight, read by a background thread into a bounded queue.

``next_batch`` never blocks: a reader thread runs the endpoint's DoGet and puts each
record batch on a queue of ``max_queued_batches`` (it waits while the queue is full, so
memory stays bounded by that many batches); ``next_batch`` takes what is there and
otherwise asks to be woken shortly (``next_awake``). The state is the number of rows
emitted; a resumed partition reads the stream again and skips that many rows, so the
server must serve the same rows for a ticket every time (a stored table, a snapshot).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from datetime import timedelta
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
from typing_extensions import override

from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.flight.protocol import shown_location
from thalweg_bytewax.records.metadata import MetadataColumns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime.paced_source import PacedPartition
from thalweg_bytewax.runtime.parts import encode_part

__all__ = ["FlightEndpointPartition"]

# How long next_batch asks to sleep when the reader thread has nothing yet.
_POLL: Final = timedelta(milliseconds=10)
_END: Final = object()


class FlightEndpointPartition(PacedPartition[KeyedBatch, int]):
    """Read one endpoint's stream; emit keyed batches; the state is rows emitted.

    Args:
        component: The source as messages name it.
        location: The server (the endpoint's own location, if it names one).
        ticket: The endpoint's ticket.
        name: The flight's name (``/``-joined path): the topic of rows without locators.
        index: The endpoint's index: the partition of rows without locators.
        options: Per-call options (deadline, token).
        columns: The metadata column names.
        max_queued: The most batches read ahead.
        skip: Rows already emitted by an earlier run (the resume state).
    """

    def __init__(
        self,
        *,
        component: str,
        location: str,
        ticket: flight.Ticket,
        name: str,
        index: int,
        options: flight.FlightCallOptions,
        columns: MetadataColumns,
        max_queued: int,
        skip: int,
    ) -> None:
        self._name = name
        self._index = index
        self._columns = columns
        self._emitted = skip
        self._skip = skip
        self._queue: queue.Queue[object] = queue.Queue(max_queued)
        self._stop = threading.Event()
        self._client = flight.FlightClient(location)
        self._ended = False
        self._where = f"{component} `{shown_location(location)}` endpoint {index} of `{name}`"
        self._thread = threading.Thread(
            target=self._read, args=(ticket, options), name="twg-flight-source", daemon=True
        )
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.1)
                return True
        return False

    def _read(self, ticket: flight.Ticket, options: flight.FlightCallOptions) -> None:
        try:
            reader = self._client.do_get(ticket, options=options)
            while not self._stop.is_set():
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                if chunk.data is not None and chunk.data.num_rows and not self._put(chunk.data):
                    return
            self._put(_END)
        except (flight.FlightError, pa.ArrowException, OSError) as exc:
            msg = (
                f"{self._where}: reading failed ({type(exc).__name__}); the flow resumes "
                "from its last epoch after a restart"
            )
            self._put(SourceError(msg))

    @override
    def next_batch(self) -> list[KeyedBatch]:
        out: list[KeyedBatch] = []
        for _ in range(self._queue.maxsize):  # at most a queue's worth per call
            if self._ended:
                break
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _END:
                self._ended = True
            elif isinstance(item, SourceError):
                raise item
            else:
                assert isinstance(item, pa.RecordBatch)
                out.extend(self._keyed(item))
        if self._ended and not out:
            raise StopIteration
        self._wake_in(_POLL if not out and not self._ended else None)
        return out

    def _keyed(self, batch: pa.RecordBatch) -> list[KeyedBatch]:
        drop = min(self._skip, batch.num_rows)  # emitted before the resume
        self._skip -= drop
        rows = batch.slice(drop) if drop else batch
        first = self._emitted  # the stream's row number of rows[0]
        self._emitted += rows.num_rows
        if rows.num_rows == 0:
            return []
        cols = self._columns
        if cols.source_topic not in rows.schema.names:
            return [(encode_part(self._name, self._index), self._stamped(rows, first))]
        return _by_source_partition(rows, cols, self._where)

    def _stamped(self, rows: pa.RecordBatch, first: int) -> pa.RecordBatch:
        cols, n = self._columns, rows.num_rows
        return (
            rows.append_column(cols.source_topic, pa.array([self._name] * n, pa.string()))
            .append_column(
                cols.source_partition, pa.array(np.full(n, self._index, np.int32), pa.int32())
            )
            .append_column(cols.source_offset, pa.array(np.arange(first, first + n), pa.int64()))
        )

    @override
    def snapshot(self) -> int:
        return self._emitted

    @override
    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._client.close()
        self._thread.join(timeout=5)


def _by_source_partition(
    rows: pa.RecordBatch, cols: MetadataColumns, where: str
) -> list[KeyedBatch]:
    """Rows that carry locators, keyed by their source partition (a batch split per one)."""
    names = [cols.source_topic, cols.source_partition, cols.source_offset]
    if any(n not in rows.schema.names or rows.column(n).null_count for n in names):
        msg = (
            f"{where}: rows carry `{cols.source_topic}` without a full locator (partition "
            "and offset, none null); serve all three, or none (then rows are numbered)"
        )
        raise SourceError(msg)
    topics, parts = rows.column(cols.source_topic), rows.column(cols.source_partition)
    unique_topics, unique_parts = pc.unique(topics), pc.unique(parts)
    if len(unique_topics) == 1 and len(unique_parts) == 1:
        return [(encode_part(unique_topics[0].as_py(), unique_parts[0].as_py()), rows)]
    out: list[KeyedBatch] = []
    for topic in pc.unique(topics).to_pylist():
        of_topic = rows.filter(pc.equal(topics, topic))
        for part in pc.unique(of_topic.column(cols.source_partition)).to_pylist():
            mine = of_topic.filter(pc.equal(of_topic.column(cols.source_partition), part))
            out.append((encode_part(topic, part), mine))
    return out
