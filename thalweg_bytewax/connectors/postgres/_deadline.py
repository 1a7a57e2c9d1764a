"""Private: calls on a sink's data connection bounded in time, and libpq's TCP bounds.

A server that stops answering without closing the connection (a dropped route, a stale
firewall entry, a host gone silent) leaves a client call blocked in C, where no signal
or timeout of Python reaches it. Two bounds end that wait:

- :func:`with_tcp_bounds` gives a connection libpq's TCP keepalives and
  ``tcp_user_timeout``, so the kernel declares a silent peer dead and the call fails;
- :class:`DataConnection` runs each call in a helper thread and stops waiting at the
  sink's ``write_timeout``: the call's connection is abandoned (closed by the helper when
  the call ends at last) and the caller gets a :class:`~thalweg_bytewax.errors.
  SinkTransientError`, so the epoch is retried on a new connection or fails loudly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from thalweg_bytewax.errors import SinkTransientError

__all__ = ["DataConnection", "close_quietly", "tcp_bounds", "with_tcp_bounds"]

logger = logging.getLogger("thalweg_bytewax.connectors.postgres.sink")

T = TypeVar("T")


def tcp_bounds(network_timeout: timedelta, connect_timeout: timedelta) -> dict[str, str]:
    """The libpq connection parameters that declare a silent peer dead in ``network_timeout``.

    Keepalives start after half of it when the connection is idle (a client waiting for
    an answer) and three probes, a sixth apart, end it; ``tcp_user_timeout`` ends it when
    sent bytes stay unacknowledged that long.
    """
    seconds = max(1, round(network_timeout.total_seconds()))
    return {
        "connect_timeout": str(max(1, round(connect_timeout.total_seconds()))),
        "keepalives": "1",
        "keepalives_idle": str(max(1, seconds // 2)),
        "keepalives_interval": str(max(1, seconds // 6)),
        "keepalives_count": "3",
        "tcp_user_timeout": str(seconds * 1000),
    }


def with_tcp_bounds(dsn: str, params: dict[str, str]) -> str:
    """``dsn`` (a URI or a ``key=value`` string) with ``params`` it does not set itself."""
    if "://" in dsn:
        query = urlsplit(dsn).query
        have = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
        extra = {k: v for k, v in params.items() if k not in have}
        if not extra:
            return dsn
        base, _, fragment = dsn.partition("#")
        sep = "&" if query else ("" if base.endswith("?") else "?")
        out = f"{base}{sep}{urlencode(extra)}"
        return f"{out}#{fragment}" if fragment else out
    have = {part.split("=", 1)[0].strip() for part in dsn.split() if "=" in part}
    extra_kv = " ".join(f"{k}={v}" for k, v in params.items() if k not in have)
    return f"{dsn} {extra_kv}".strip() if extra_kv else dsn


def close_quietly(conn: Any) -> None:
    """Roll back and close a connection that may be gone; failures are only logged."""
    try:
        conn.rollback()
    except Exception:  # the connection may be gone; closing it is all that is left
        logger.debug("postgres sink: rollback on a failed connection failed", exc_info=True)
    try:
        conn.close()
    except Exception:
        logger.debug("postgres sink: closing a failed connection failed", exc_info=True)


class DataConnection:
    """One shard's data connection: opened on first use, every call on it bounded in time.

    Args:
        connect: Opens a new connection (ADBC, autocommit off).
        target: How messages name the sink (``postgres sink `<schema>.<table>```).
        timeout: The longest one call (connect included) may take.
    """

    def __init__(self, connect: Callable[[], Any], target: str, timeout: timedelta) -> None:
        self._connect = connect
        self._target = target
        self._timeout = timeout
        self._conn: Any = None

    def run(self, work: Callable[[Any], T], what: str) -> T:
        """``work(connection)`` in a helper thread, waited for at most the timeout.

        Raises:
            SinkTransientError: ``work`` did not return in time; its connection is
                abandoned (closed when the call ends) and the next call opens a new one.
            Exception: Whatever ``work`` (or opening the connection) raised; the
                connection stays for :meth:`drop`.
        """
        held = _Held(self._conn)
        self._conn = None

        def call() -> T:
            if held.conn is None:
                held.conn = self._connect()
            return work(held.conn)

        done = threading.Event()
        lock = threading.Lock()
        result: list[T] = []
        raised: list[BaseException] = []

        def main() -> None:
            try:
                result.append(call())
            except BaseException as exc:  # handed to the waiting caller
                raised.append(exc)
            finally:
                with lock:
                    done.set()
                    late = held.abandoned
                if late and held.conn is not None:
                    close_quietly(held.conn)

        threading.Thread(target=main, name="twg-postgres-call", daemon=True).start()
        finished = done.wait(self._timeout.total_seconds())
        with lock:
            if not finished and not done.is_set():
                held.abandoned = True
        if held.abandoned:
            seconds = self._timeout.total_seconds()
            msg = (
                f"{self._target}: the server did not answer within {seconds:g} s "
                f"(write_timeout) during {what}; the connection was abandoned (check the "
                f"network path to the server, or raise write_timeout if the server is only "
                f"slow)"
            )
            raise SinkTransientError(msg)
        self._conn = held.conn
        if raised:
            raise raised[0]
        return result[0]

    def drop(self) -> None:
        """Roll back and close the connection, if one is open (after a failure, at close)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            close_quietly(conn)


class _Held:
    """The connection of one call, and whether its caller stopped waiting for it."""

    __slots__ = ("abandoned", "conn")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.abandoned = False
