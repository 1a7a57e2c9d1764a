"""A small pool of Flight clients to one location.

A client is a gRPC channel: opening one costs a connection and a handshake, so a step
keeps a few and reuses them. A client that failed a call is closed and dropped (its
channel may be broken); the next borrower opens a new one. At most ``size`` clients
exist at once: a borrower waits for one to be returned.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pyarrow.flight as flight

__all__ = ["FlightClientPool"]


class FlightClientPool:
    """At most ``size`` clients to ``location``, reused, a failed one replaced.

    Args:
        location: The server, e.g. ``grpc://127.0.0.1:8815`` (``grpc+tls://`` for TLS).
        size: The most clients open at once.
    """

    def __init__(self, location: str, *, size: int = 2) -> None:
        if size < 1:
            msg = f"flight client pool: expected size >= 1; got {size!r}"
            raise ValueError(msg)
        self.location = location
        self.size = size
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[flight.FlightClient] = []
        self._lock = threading.Lock()
        self.opened = 0
        """Clients opened so far (a growing count means calls keep failing)."""

    @contextlib.contextmanager
    def client(self) -> Iterator[flight.FlightClient]:
        """Borrow a client; it goes back to the pool unless the block raised."""
        self._slots.acquire()
        try:
            with self._lock:
                client = self._idle.pop() if self._idle else None
            if client is None:
                client = flight.FlightClient(self.location)
                self.opened += 1
            try:
                yield client
            except BaseException:
                with contextlib.suppress(Exception):
                    client.close()
                raise
            with self._lock:
                self._idle.append(client)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close every idle client (borrowed ones close when they fail or are returned)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for client in idle:
            with contextlib.suppress(Exception):
                client.close()
