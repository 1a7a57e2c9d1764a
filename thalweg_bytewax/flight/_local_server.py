"""A Flight server of this package's own, serving on this host (a sidecar, a table server)."""

from __future__ import annotations

import threading
from typing import ClassVar, Self

import pyarrow.flight as flight

__all__ = ["LocalFlightServer"]


class LocalFlightServer(flight.FlightServerBase):  # type: ignore[misc]
    """A Flight server on ``127.0.0.1`` that can serve on a thread of its own.

    Subclasses name the thread it serves on (``thread_name``), so a stack dump says
    which server a thread is.
    """

    thread_name: ClassVar[str]

    @property
    def location(self) -> str:
        """The ``grpc://`` location clients connect to (on this host)."""
        return f"grpc://127.0.0.1:{self.port}"

    def serve_in_thread(self) -> Self:
        """Serve on a daemon thread; returns self (``shutdown()`` stops it)."""
        threading.Thread(target=self.serve, name=self.thread_name, daemon=True).start()
        return self
