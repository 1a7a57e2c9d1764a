"""``thalweg dev postgres``: a local PostgreSQL (pgserver) for trying the table sinks.

:func:`serve` starts a real PostgreSQL 16 from the ``pgserver`` wheel in a persistent
data directory (``.thalweg/postgres`` by default: the tables survive a restart), prints
its DSN (``DSN postgresql://…``), publishes it in ``.thalweg/postgres.dsn`` and waits;
Ctrl-C or SIGTERM stops the server and removes the DSN file, keeping the data.
:func:`published_dsn` waits for that file, so a second shell (or the next command of a
script) can read the DSN of a server that is still starting.

The server listens on a Unix socket inside its data directory only, with the
``postgres`` role and no password: for local trials, never for shared machines.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

from thalweg_bytewax._deps import require
from thalweg_bytewax._published import publish_line, withdraw_line
from thalweg_bytewax.errors import ConfigError

__all__ = ["DEV_DSN_FILE", "DEV_POSTGRES_DIR", "published_dsn", "serve"]

logger = logging.getLogger(__name__)

DEV_POSTGRES_DIR = Path(".thalweg") / "postgres"
"""Where ``thalweg dev postgres`` keeps its data (relative to the working directory)."""
DEV_DSN_FILE = Path(".thalweg") / "postgres.dsn"
"""Where ``thalweg dev postgres`` publishes its DSN while it runs."""


def serve(data_dir: Path = DEV_POSTGRES_DIR, dsn_file: Path = DEV_DSN_FILE) -> int:
    """Start PostgreSQL in ``data_dir``, publish its DSN in ``dsn_file``, wait for a signal.

    Returns:
        0 once stopped by Ctrl-C or SIGTERM.

    Raises:
        MissingDependencyError: When ``pgserver`` is not installed (with the pip line).
    """
    with warnings.catch_warnings():
        # platformdirs warns once that XDG_RUNTIME_DIR is unset (containers, CI).
        warnings.simplefilter("ignore")
        pgserver = require("pgserver", extra="dev")
    data_dir = data_dir.resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    print(f"starting a local PostgreSQL in {data_dir} (pgserver); Ctrl-C stops it")  # noqa: T201
    sys.stdout.flush()
    server = pgserver.get_server(data_dir, cleanup_mode="stop")
    dsn = str(server.get_uri())
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        publish_line(dsn_file, dsn)
        print(f"DSN {dsn}", flush=True)  # noqa: T201
        print(f"(also in {dsn_file}: THALWEG_POSTGRES_DSN=$(cat {dsn_file}))", flush=True)  # noqa: T201
        while not stop.wait(0.5):
            pass
    finally:
        withdraw_line(dsn_file, dsn)  # only our own DSN
        server.cleanup()  # cleanup_mode="stop": stops the server, keeps the data
    return 0


def published_dsn(dsn_file: Path = DEV_DSN_FILE, wait_s: float = 120.0) -> str:
    """The DSN a running ``thalweg dev postgres`` published, waiting for it to start.

    Raises:
        ConfigError: When no DSN appears in ``dsn_file`` within ``wait_s`` seconds.
    """
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(OSError):
            dsn = dsn_file.read_text().strip()
            if dsn:
                return dsn
        if time.monotonic() >= deadline:
            msg = (
                f"dev postgres: expected a DSN in `{dsn_file}` within {wait_s:g} s; got none; "
                "start the server with `thalweg dev postgres &` in this directory"
            )
            raise ConfigError(msg)
        time.sleep(0.1)
