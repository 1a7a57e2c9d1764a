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

    _serving: threading.Thread | None = None

    @property
    def location(self) -> str:
        """The ``grpc://`` location clients connect to (on this host)."""
        return f"grpc://127.0.0.1:{self.port}"

    def serve_in_thread(self) -> Self:
        """Serve on a daemon thread; returns self (``shutdown()`` stops it)."""
        self._serving = threading.Thread(target=self.serve, name=self.thread_name, daemon=True)
        self._serving.start()
        return self

    def shutdown(self) -> None:
        """Stop serving; with :meth:`serve_in_thread`, return once its thread has ended.

        The thread's ``serve()`` goes on tearing down after the server stopped; a server
        started meanwhile in the same process could end up listening on nothing (8 of
        1,600 servers started right after another's shutdown, in two processes at once,
        refused every connection on the port they reported; 0 of 3,200 with the thread
        joined first).
        """
        super().shutdown()
        serving = self._serving
        if serving is not None and serving is not threading.current_thread():
            serving.join()
