"""The package's own Flight servers (table server, sidecar) stop cleanly when served on a thread."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pyarrow as pa

from thalweg_bytewax.flight.sidecar import SidecarServer
from thalweg_bytewax.flight.table_server import TableServer


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _echo(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def test_shutdown_returns_once_the_serving_thread_has_ended(tmp_path: Path) -> None:
    # A serving thread still tearing down while the next server of the process started
    # left that server listening on nothing, now and then: every connection refused.
    for i in range(20):
        server = TableServer(tmp_path / f"s{i}").serve_in_thread()
        assert _listening(server.port)
        server.shutdown()
        assert not any(t.name == TableServer.thread_name for t in threading.enumerate())
        sidecar = SidecarServer(_echo).serve_in_thread()
        assert _listening(sidecar.port)
        sidecar.shutdown()
        assert not any(t.name == SidecarServer.thread_name for t in threading.enumerate())


def test_a_server_not_served_on_a_thread_still_shuts_down(tmp_path: Path) -> None:
    server = TableServer(tmp_path / "s")
    assert _listening(server.port)
    server.shutdown()
    assert not _listening(server.port)
