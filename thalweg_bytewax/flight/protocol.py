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

A server dedups by locator: a row whose ``(topic, partition, offset)`` it holds is not
stored again. Rows received and not confirmed may be dropped when the stream breaks
(the sink sends them again from the source). :mod:`thalweg_bytewax.flight.table_server`
is a reference implementation.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pyarrow.flight as flight

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.errors import SinkTerminalError, SinkTransientError, ThalwegError

__all__ = [
    "HELD_ACTION",
    "call_options",
    "classify",
    "confirm_message",
    "confirmed_seq",
    "held_request",
    "held_spans",
    "shown_location",
]

HELD_ACTION: Final = "twg.held"
"""The DoAction type that asks a server which offsets of a source partition it holds."""

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
