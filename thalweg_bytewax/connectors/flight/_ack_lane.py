"""Private: the Flight sink's ack lane: pipelined sends, one confirm round trip per burst.

``send`` returns as soon as the lane accepts a batch into its bounded channel. A
background thread drains the channel, writes a burst of batches to the DoPut stream
and confirms the largest offset of each source partition with one round trip
(:func:`~thalweg_bytewax.flight.protocol.confirm_message`). Only a confirm advances
:attr:`AckLane.confirmed`; the sink's commit waits for it once per epoch. Awaiting a
confirm inline after every send would leave one batch in flight per sink (the
reference's ADR-0060 measured a ~20,000x loss from that on the predecessor engine;
``benchmarks/flight_ack.py`` measures it here).

Backpressure is the channel filling: a batch's bytes count from ``send`` until its
burst is confirmed, and ``send`` blocks while they would pass ``max_unconfirmed_bytes``
(a batch larger than the bound is let in alone, so nothing deadlocks). Unconfirmed
batches are kept, so a stream that breaks is reopened and they are sent again (the
server skips rows whose locator it holds) for ``retry_for``; after that the lane fails
with a :class:`~thalweg_bytewax.errors.SinkTransientError` that ``send`` and
``wait_confirmed`` raise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from thalweg_bytewax.errors import SinkError, SinkTransientError, ThalwegError
from thalweg_bytewax.flight.protocol import classify, confirm_message, confirmed_seq

__all__ = ["RETRY_CAP_S", "RETRY_FIRST_S", "AckLane", "AckLaneStats"]

logger = logging.getLogger(__name__)

# First pause before a broken stream is reopened; doubles up to the cap.
RETRY_FIRST_S = 0.05
RETRY_CAP_S = 2.0

OpenStream = Callable[
    [flight.FlightClient, pa.Schema], tuple[flight.FlightStreamWriter, flight.FlightMetadataReader]
]
"""Opens a DoPut stream of one schema on a client: ``(writer, metadata reader)``."""


@dataclass
class AckLaneStats:
    """Plain counters of one ack lane (the observability layer exports them).

    Attributes:
        batches_sent: Batches accepted by :meth:`AckLane.send`.
        confirms: Confirm round trips answered.
        max_burst: The most batches one confirm covered (the in-flight depth reached).
        unconfirmed_bytes: Bytes sent and not yet confirmed, now.
        peak_unconfirmed_bytes: The most bytes unconfirmed at once.
        blocked_sends: Sends that waited for room in the channel (backpressure).
        reconnects: Streams reopened after a failure.
    """

    batches_sent: int = 0
    confirms: int = 0
    max_burst: int = 0
    unconfirmed_bytes: int = 0
    peak_unconfirmed_bytes: int = 0
    blocked_sends: int = 0
    reconnects: int = 0


@dataclass
class _Item:
    batch: pa.RecordBatch
    offsets: dict[str, int]
    nbytes: int


@dataclass
class _Stream:
    schema: pa.Schema
    writer: flight.FlightStreamWriter
    reader: flight.FlightMetadataReader
    written: list[_Item] = field(default_factory=list)


class AckLane:
    """Send batches to one DoPut stream from a background thread; confirm them in bursts.

    Args:
        component: The sink as messages name it.
        location: The server (for messages; redacted there).
        connect: Opens a client to the server.
        open_stream: Opens a DoPut stream of one schema on a client.
        max_unconfirmed_bytes: The bound on bytes sent and not yet confirmed.
        max_burst: The most batches one confirm covers.
        retry_for: How long (seconds) a broken stream is reopened and resent before the
            lane fails.
    """

    def __init__(
        self,
        *,
        component: str,
        location: str,
        connect: Callable[[], flight.FlightClient],
        open_stream: OpenStream,
        max_unconfirmed_bytes: int,
        max_burst: int,
        retry_for: float,
    ) -> None:
        self.component = component
        self.location = location
        self.stats = AckLaneStats()
        self.confirmed: dict[str, int] = {}
        """The largest confirmed offset per source partition key."""
        self._connect = connect
        self._open_stream = open_stream
        self._max_bytes = max_unconfirmed_bytes
        self._max_burst = max_burst
        self._retry_for = retry_for
        self._cond = threading.Condition()
        self._channel: deque[_Item] = deque()
        self._accepted = 0  # batches accepted by send
        self._done = 0  # batches confirmed
        self._error: ThalwegError | None = None
        self._closing = False
        self._client: flight.FlightClient | None = None
        self._stream: _Stream | None = None
        self._seq = 0
        self._thread = threading.Thread(target=self._run, name="twg-flight-ack-lane", daemon=True)
        self._thread.start()

    # -- the caller's side -------------------------------------------------------------

    def send(self, batch: pa.RecordBatch, offsets: dict[str, int]) -> None:
        """Hand a batch to the lane; blocks only while the channel is full.

        Args:
            batch: The rows, with their locator columns.
            offsets: The largest offset of each source partition key in ``batch``.

        Raises:
            SinkError: The lane failed (the stream broke for longer than ``retry_for``,
                or the server refused the rows).
        """
        nbytes = batch.nbytes
        with self._cond:
            if self._full(nbytes):
                self.stats.blocked_sends += 1
                while self._full(nbytes):
                    self._cond.wait()
            self._raise_if_failed()
            self._channel.append(_Item(batch, offsets, nbytes))
            self._accepted += 1
            self.stats.batches_sent += 1
            self.stats.unconfirmed_bytes += nbytes
            self.stats.peak_unconfirmed_bytes = max(
                self.stats.peak_unconfirmed_bytes, self.stats.unconfirmed_bytes
            )
            self._cond.notify_all()

    def _full(self, nbytes: int) -> bool:
        unconfirmed = self.stats.unconfirmed_bytes
        return self._error is None and unconfirmed > 0 and unconfirmed + nbytes > self._max_bytes

    def wait_confirmed(self, timeout_s: float) -> None:
        """Block until every batch sent so far is confirmed.

        Raises:
            SinkError: The lane failed, or ``timeout_s`` passed first (then the lane is
                failed too: its stream is closed, and the epoch replays after a restart).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._error is None and self._done < self._accepted:
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = (
                        f"{self.component}: {self._accepted - self._done} batches not "
                        f"confirmed within {timeout_s:g} s; is the server stalled? raise "
                        "`confirm_timeout` if its durable writes are this slow"
                    )
                    self._fail_locked(SinkTransientError(msg))
                    break
                self._cond.wait(left)
            self._raise_if_failed()

    def close(self) -> None:
        """Stop the thread and close the stream and client (nothing more is confirmed)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._drop_client()
        self._thread.join(timeout=5)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _fail_locked(self, error: ThalwegError) -> None:
        if self._error is None:
            self._error = error
        self._cond.notify_all()
        # Unblock the thread if it waits on the server.
        threading.Thread(target=self._drop_client, daemon=True).start()

    # -- the lane's thread -------------------------------------------------------------

    def _next_burst(self) -> list[_Item] | None:
        with self._cond:
            while not self._channel and not self._closing and self._error is None:
                self._cond.wait()
            if self._closing or self._error is not None:
                return None
            burst = [self._channel.popleft()]
            schema = burst[0].batch.schema
            while (
                self._channel
                and len(burst) < self._max_burst
                and self._channel[0].batch.schema.equals(schema)
            ):
                burst.append(self._channel.popleft())
            return burst

    def _run(self) -> None:
        pending: list[_Item] = []  # written or to write, not confirmed
        retry_until: float | None = None
        pause = RETRY_FIRST_S
        while True:
            if not pending:
                burst = self._next_burst()
                if burst is None:
                    return
                pending = burst
            try:
                self._write_and_confirm(pending)
            except (flight.FlightError, pa.ArrowException, OSError) as exc:
                error = classify(self.component, self.location, "sending a burst", exc)
                now = time.monotonic()
                retry_until = retry_until if retry_until is not None else now + self._retry_for
                self._drop_client()
                failed = self._closing or self._error is not None  # closed, or timed out
                if error.retryable and now + pause < retry_until and not failed:
                    logger.info("%s: stream broke; reopening in %.2f s", self.component, pause)
                    time.sleep(pause)
                    pause = min(pause * 2, RETRY_CAP_S)
                    self.stats.reconnects += 1
                    continue
                with self._cond:
                    self._fail_locked(error)
                return
            except SinkError as error:
                with self._cond:
                    self._fail_locked(error)
                return
            retry_until, pause = None, RETRY_FIRST_S
            self._confirmed(pending)
            pending = []

    def _write_and_confirm(self, burst: list[_Item]) -> None:
        stream = self._stream_for(burst[0].batch.schema)
        offsets: dict[str, int] = {}
        for item in burst:
            stream.writer.write_batch(item.batch)
            for key, offset in item.offsets.items():
                offsets[key] = max(offset, offsets.get(key, offset))
        self._seq += 1
        stream.writer.write_metadata(pa.py_buffer(confirm_message(self._seq, offsets)))
        reply = stream.reader.read()
        if confirmed_seq(reply) != self._seq:
            msg = (
                f"{self.component}: expected the server to confirm burst {self._seq}; got "
                f"{'the end of the stream' if reply is None else 'another answer'}; is it a "
                "thalweg Flight sink target?"
            )
            raise SinkTransientError(msg)

    def _confirmed(self, burst: list[_Item]) -> None:
        with self._cond:
            for item in burst:
                for key, offset in item.offsets.items():
                    self.confirmed[key] = max(offset, self.confirmed.get(key, offset))
                self.stats.unconfirmed_bytes -= item.nbytes
            self._done += len(burst)
            self.stats.confirms += 1
            self.stats.max_burst = max(self.stats.max_burst, len(burst))
            self._cond.notify_all()

    def _stream_for(self, schema: pa.Schema) -> _Stream:
        stream = self._stream
        if stream is not None and stream.schema.equals(schema):
            return stream
        if stream is not None:  # every burst on it is confirmed: end it cleanly
            with contextlib.suppress(flight.FlightError, pa.ArrowException):
                stream.writer.done_writing()
                stream.writer.close()
            self._stream = None
        if self._client is None:
            self._client = self._connect()
        writer, reader = self._open_stream(self._client, schema)
        self._stream = _Stream(schema, writer, reader)
        return self._stream

    def _drop_client(self) -> None:
        client, self._client, self._stream = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def __repr__(self) -> str:
        return f"AckLane({self.component!r}, unconfirmed={self.stats.unconfirmed_bytes})"

    def __getstate__(self) -> Any:
        msg = f"{self.component}: an ack lane holds a thread and a client; it cannot be pickled"
        raise TypeError(msg)
