"""Private: PostgreSQL client errors classified by SQLSTATE and type, never by message text.

Both clients of :class:`~thalweg_bytewax.connectors.postgres.PostgresSink` raise errors
that carry a SQLSTATE: psycopg (``exc.sqlstate``, ``exc.diag``) for control, and the ADBC
PostgreSQL driver (``exc.sqlstate``) for the data path. An error with no SQLSTATE is a
connection failure when its type says so (``psycopg.OperationalError``, ADBC's
``OperationalError``): the client lost the server before it answered. A
:class:`~thalweg_bytewax.errors.SinkTransientError` (a server that did not answer in
time) is transient.
"""

from __future__ import annotations

from typing import Any

import psycopg

from thalweg_bytewax import _deps
from thalweg_bytewax._redact import redact_origins_in, redact_text
from thalweg_bytewax.errors import SinkTransientError

__all__ = ["describe_error", "is_transient", "sqlstate_of"]

adbc_driver_manager = _deps.require("adbc_driver_manager", extra="postgres")

# Classes and codes where the same transaction can succeed on a new connection later
# (PostgreSQL Appendix A, "PostgreSQL Error Codes"):
_TRANSIENT_CLASSES = frozenset(
    {
        "08",  # connection exception
        "53",  # insufficient resources: disk full, out of memory, too many connections
        "58",  # system error (I/O error)
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57014",  # query_canceled (statement timeout, a cancel from an operator)
        "57P01",  # admin_shutdown (server restart or pg_terminate_backend)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (the server is starting up)
    }
)
# Codes of a transient class that are terminal: 08P01 (protocol violation) is what a
# binary COPY row of the wrong type gets; resending the same bytes fails again.
_TERMINAL_CODES = frozenset({"08P01"})


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE an error from psycopg or ADBC carries, else None."""
    code = getattr(exc, "sqlstate", None)
    if isinstance(code, str) and len(code) == 5:
        return code
    return None


def _is_connection_error(exc: BaseException) -> bool:
    """A client error without SQLSTATE raised because the connection failed."""
    return isinstance(exc, (psycopg.OperationalError, adbc_driver_manager.OperationalError))


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the whole transaction on a new connection can help."""
    if isinstance(exc, SinkTransientError):
        return True
    code = sqlstate_of(exc)
    if code is None:
        return _is_connection_error(exc)
    if code in _TERMINAL_CODES:
        return False
    return code in _TRANSIENT_CODES or code[:2] in _TRANSIENT_CLASSES


def describe_error(exc: BaseException, dsn: str) -> str:
    """A short description of a client error: SQLSTATE, column and the server's words.

    Secrets in the text (the DSN, whole or in parts) are redacted.
    """
    parts = []
    code = sqlstate_of(exc)
    if code is not None:
        parts.append(f"SQLSTATE {code}")
    diag: Any = getattr(exc, "diag", None)
    column = getattr(diag, "column_name", None) if diag is not None else None
    if column:
        parts.append(f"column `{column}`")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    parts.append(redact_text(redact_origins_in(first, dsn)))
    return ", ".join(parts)
