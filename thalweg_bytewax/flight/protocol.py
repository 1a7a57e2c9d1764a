"""The wire protocol of the Flight sink, and how Flight errors map onto the retry axis.

A :class:`~thalweg_bytewax.connectors.flight.FlightSink` speaks plain Arrow Flight:

- **DoPut** with the descriptor ``FlightDescriptor.for_path(target)``: record batches
  with their ``_twg_`` columns, in offset order per source partition. A schema change
  ends the stream (after a confirm) and starts another.
- **Confirm** on the same DoPut: the client writes an app-metadata message
  ``{"confirm": SEQ, "offsets": {"orders:3": 1234, ...}}`` (the largest offset sent per
  source partition); the server makes every row it received on the stream durable and
  answers on the DoPut's metadata stream ``{"confirmed": SEQ}``. One round trip confirms
  a whole burst.
- **DoAction** ``twg.held`` with ``{"target": ..., "topic": ..., "partition": ...}``:
  the server answers one result ``{"spans": [[first, last], ...]}``, the offsets it
  holds durably for that source partition. A resumed sink skips them.
- **DoAction** ``twg.held_ids`` (optional) with ``{"target": ..., "topic": ...,
  "partition": ..., "first": F, "last": L}``: one result, an Arrow IPC stream of the
  ``offset`` (int64) and ``record_id`` (binary(16), null when a row has none) of every
  row held at offsets ``F..L``. A resumed sink checks the rows it would skip against
  them: a different record at a held offset is refused, and a row missing below the
  resumed position is refused instead of skipped. A server that does not list the
  action in ``ListActions`` is checked by offset alone (with a warning).

A server dedups by locator: a row whose ``(topic, partition, offset)`` it holds is not
stored again. Rows received and not confirmed may be dropped when the stream breaks
(the sink sends them again from the source). :mod:`thalweg_bytewax.flight.table_server`
is a reference implementation.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pyarrow.ipc as ipc

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError, ThalwegError

__all__ = [
    "HELD_ACTION",
    "HELD_IDS_ACTION",
    "HELD_IDS_SCHEMA",
    "call_options",
    "classify",
    "confirm_message",
    "confirmed_seq",
    "held_ids",
    "held_ids_answer",
    "held_ids_request",
    "held_request",
    "held_spans",
    "shown_location",
]

HELD_ACTION: Final = "twg.held"
"""The DoAction type that asks a server which offsets of a source partition it holds."""

HELD_IDS_ACTION: Final = "twg.held_ids"
"""The DoAction type that asks a server for the record ids it holds over an offset range."""

HELD_IDS_SCHEMA: Final = pa.schema(
    [pa.field("offset", pa.int64(), nullable=False), pa.field("record_id", pa.binary(16))]
)
"""The columns of a ``twg.held_ids`` answer."""

# A `twg.held_ids` answer is at most this many bytes per asked offset, plus the IPC
# stream's own framing: 8 (offset) + 16 (record id) + validity, rounded up generously.
_HELD_IDS_BYTES_PER_ROW: Final = 64
_HELD_IDS_FRAMING_BYTES: Final = 1 << 20

# The Flight errors after which the same call can succeed: the server is down or
# restarting, overloaded, or the call ran out of time. Classified by type (never text).
_TRANSIENT: Final = (
    flight.FlightUnavailableError,
    flight.FlightTimedOutError,
    flight.FlightCancelledError,
    flight.FlightInternalError,
    flight.FlightServerError,
    ConnectionError,
    TimeoutError,
)


def shown_location(location: str) -> str:
    """A location as messages may show it (userinfo and query values redacted)."""
    return redact_url(location)


def call_options(timeout_s: float | None, token: str | None) -> flight.FlightCallOptions:
    """Per-call options: a deadline and, with a token, an ``authorization`` bearer header."""
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else None
    return flight.FlightCallOptions(timeout=timeout_s, headers=headers)


def classify(component: str, location: str, what: str, exc: BaseException) -> ThalwegError:
    """A Flight failure as a :class:`SinkTransientError` (retry) or :class:`SinkTerminalError`.

    The message names the component, the location (redacted) and the call, and the
    failure's type; it never echoes the server's text, which may quote credentials.
    """
    where = f"{component} `{shown_location(location)}`: {what} failed ({type(exc).__name__})"
    if isinstance(exc, _TRANSIENT):
        return SinkTransientError(f"{where}; retrying can help once the server is back")
    return SinkTerminalError(f"{where}; check the server's log and the sink's settings")


def confirm_message(seq: int, offsets: dict[str, int]) -> bytes:
    """The app-metadata a client writes to ask the server to confirm a burst."""
    return json.dumps({"confirm": seq, "offsets": offsets}, separators=(",", ":")).encode()


def confirmed_seq(buf: Any) -> int | None:
    """The sequence number a server's confirm answer carries, or None if it is not one."""
    if buf is None:
        return None
    try:
        reply = json.loads(bytes(buf))
    except ValueError:
        return None
    seq = reply.get("confirmed") if isinstance(reply, dict) else None
    return seq if isinstance(seq, int) else None


def held_request(target: str, topic: str, partition: int) -> flight.Action:
    """The ``twg.held`` action for one source partition of ``target``."""
    body = {"target": target, "topic": topic, "partition": partition}
    return flight.Action(HELD_ACTION, json.dumps(body).encode())


def held_spans(results: list[Any], *, where: str) -> list[tuple[int, int]]:
    """The ``(first, last)`` spans of a ``twg.held`` answer, checked.

    Raises:
        SinkTerminalError: When the answer is not ``{"spans": [[first, last], ...]}``.
    """
    try:
        reply = json.loads(bytes(results[0].body)) if results else None
        spans = [(int(a), int(b)) for a, b in reply["spans"]]  # type: ignore[index]
    except (ValueError, TypeError, KeyError, IndexError):
        msg = (
            f'{where}: expected a `{HELD_ACTION}` answer {{"spans": [[first, last], ...]}}; '
            "got something else; is the server a thalweg Flight sink target?"
        )
        raise SinkTerminalError(msg) from None
    if any(a > b or a < 0 for a, b in spans):
        msg = f"{where}: `{HELD_ACTION}` answered a span with first > last or below 0"
        raise SinkTerminalError(msg)
    return spans


def held_ids_request(
    target: str, topic: str, partition: int, first: int, last: int
) -> flight.Action:
    """The ``twg.held_ids`` action for offsets ``first..last`` of one source partition."""
    body = {"target": target, "topic": topic, "partition": partition}
    body |= {"first": first, "last": last}
    return flight.Action(HELD_IDS_ACTION, json.dumps(body).encode())


def held_ids_answer(table: pa.Table) -> flight.Result:
    """The one result a server answers ``twg.held_ids`` with (``HELD_IDS_SCHEMA`` rows)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, HELD_IDS_SCHEMA) as writer:
        writer.write_table(table.cast(HELD_IDS_SCHEMA))
    return flight.Result(sink.getvalue())


def held_ids(results: list[Any], first: int, last: int, *, where: str) -> pa.Table:
    """The ``offset`` and ``record_id`` columns of a ``twg.held_ids`` answer, checked.

    The answer is bounded before it is decoded: one result, at most a few dozen bytes
    per asked offset, each offset once and inside ``first..last``.

    Raises:
        SinkTerminalError: When the answer is not one Arrow IPC stream of
            ``HELD_IDS_SCHEMA`` rows inside the asked range.
    """
    expected = f"expected a `{HELD_IDS_ACTION}` answer (one Arrow IPC stream of offset, record_id)"
    asked = last - first + 1
    limit = asked * _HELD_IDS_BYTES_PER_ROW + _HELD_IDS_FRAMING_BYTES
    if len(results) != 1:
        msg = f"{where}: {expected}; got {len(results)} results"
        raise SinkTerminalError(msg)
    body = results[0].body
    if body.size > limit:
        msg = f"{where}: {expected} of at most {limit} bytes for {asked} offsets; got {body.size}"
        raise SinkTerminalError(msg)
    try:
        table = ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, OSError):
        msg = (
            f"{where}: {expected}; got bytes that are not one; "
            "is the server a thalweg Flight sink target?"
        )
        raise SinkTerminalError(msg) from None
    if not table.schema.equals(HELD_IDS_SCHEMA, check_metadata=False):
        msg = f"{where}: {expected}; got columns {table.schema.names}"
        raise SinkTerminalError(msg)
    offsets = table.column("offset")
    if (
        table.num_rows > asked
        or table.num_rows
        and (pc.min(offsets).as_py() < first or pc.max(offsets).as_py() > last)
    ):
        msg = f"{where}: `{HELD_IDS_ACTION}` answered offsets outside {first}..{last}"
        raise SinkTerminalError(msg)
    return table
