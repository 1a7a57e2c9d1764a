"""A reference Flight table server in this process, on a free localhost port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from thalweg_bytewax.flight.table_server import TableServer


@pytest.fixture
def table_server(tmp_path: Path) -> Iterator[TableServer]:
    """A :class:`TableServer` storing under ``tmp_path / "server"``."""
    server = TableServer(tmp_path / "server").serve_in_thread()
    try:
        yield server
    finally:
        server.shutdown()
