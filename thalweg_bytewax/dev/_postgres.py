"""``thalweg dev postgres``: a local PostgreSQL (pgserver) for trying the table sinks.

:func:`serve` starts a real PostgreSQL 16 from the ``pgserver`` wheel in a persistent
data directory (``.thalweg/postgres`` by default: the tables survive a restart), prints
its DSN (``DSN postgresql://…``), publishes it in ``.thalweg/postgres.dsn`` and waits;
Ctrl-C or SIGTERM stops the server and removes the DSN file, keeping the data.
:func:`published_dsn` waits for that file, so a second shell (or the next command of a
script) can read the DSN of a server that is still starting.

The server listens on a Unix socket inside its data directory only (mode 0700, and the
socket itself 0700), with the ``postgres`` role and no password: only the user running
it (and root) can connect. The command refuses rather than weaken that:

* a data directory too long for a Unix socket path (pgserver would put the socket, which
  trusts every connection, in a shared runtime directory instead);
* run as root, a data directory (or the pgserver install) with a parent directory that
  is not already readable and traversable by every user (pgserver runs PostgreSQL as a
  separate ``pgserver`` user and would ``chmod g+rx,o+rx`` every such parent).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import sys
import threading
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

from thalweg_bytewax._deps import require
from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.dev._published import publish_line, withdraw_line
from thalweg_bytewax.errors import ConfigError

__all__ = ["DEV_DSN_FILE", "DEV_POSTGRES_DIR", "published_dsn", "serve"]

logger = logging.getLogger(__name__)

DEV_POSTGRES_DIR = Path(".thalweg") / "postgres"
"""Where ``thalweg dev postgres`` keeps its data (relative to the working directory)."""
DEV_DSN_FILE = Path(".thalweg") / "postgres.dsn"
"""Where ``thalweg dev postgres`` publishes its DSN while it runs."""

# PostgreSQL's socket file in its directory (pgserver keeps the default port).
_SOCKET_NAME = ".s.PGSQL.5432"
# The longest Unix socket path, in bytes without the final NUL (`sun_path` is 108 bytes
# on Linux, 104 on macOS and the BSDs).
_MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103
# What pgserver, run as root, adds to every parent of the data directory.
_TRAVERSE_BY_ALL = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
_OWNER_ONLY = 0o700


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
    check_socket_path(data_dir)
    if os.geteuid() == 0:
        from pgserver._commands import POSTGRES_BIN_PATH  # noqa: PLC0415 - the extra

        check_no_widening(data_dir, Path(POSTGRES_BIN_PATH))
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    print(f"starting a local PostgreSQL in {data_dir} (pgserver); Ctrl-C stops it")  # noqa: T201
    sys.stdout.flush()
    server = pgserver.get_server(data_dir, cleanup_mode="stop")
    try:
        seal_socket(server, data_dir)
    except ConfigError:
        server.cleanup()
        raise
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


def published_dsn(
    dsn_file: Path = DEV_DSN_FILE,
    wait: timedelta | Unset = UNSET,
    *,
    wait_s: float | Unset = UNSET,
) -> str:
    """The DSN a running ``thalweg dev postgres`` published, waiting for it to start.

    Args:
        dsn_file: Where the server publishes its DSN.
        wait: How long to wait for it (default 120 s).
        wait_s: Deprecated: ``wait`` in seconds.

    Raises:
        ConfigError: When no DSN appears in ``dsn_file`` within ``wait``, or ``wait`` is
            no positive ``timedelta`` (or is given under both names).
    """
    bound = duration_keyword(
        "published_dsn", "wait", wait, "wait_s", wait_s, default=timedelta(seconds=120)
    )
    deadline = time.monotonic() + bound
    while True:
        with contextlib.suppress(OSError):
            dsn = dsn_file.read_text().strip()
            if dsn:
                return dsn
        if time.monotonic() >= deadline:
            msg = (
                f"dev postgres: expected a DSN in `{dsn_file}` within {bound:g} s; got none; "
                "start the server with `thalweg dev postgres &` in this directory"
            )
            raise ConfigError(msg)
        time.sleep(0.1)


def check_socket_path(data_dir: Path) -> None:
    """Refuse a data directory whose socket path a Unix socket cannot hold.

    pgserver would then put the socket in a shared runtime directory (``/tmp/runtime-…``
    when ``XDG_RUNTIME_DIR`` is unset), where every local user can reach a server that
    trusts every connection.

    Raises:
        ConfigError: Naming the directory, its length and the limit.
    """
    length = len(os.fsencode(data_dir / _SOCKET_NAME))
    if length > _MAX_SOCKET_PATH:
        msg = (
            f"dev postgres: the data directory `{data_dir}` is too long for a Unix socket "
            f"path ({length} bytes with `/{_SOCKET_NAME}`, at most {_MAX_SOCKET_PATH}), and "
            "the server's socket must stay inside it, where only you can reach it; pass a "
            "shorter `--data-dir`"
        )
        raise ConfigError(msg)


def check_no_widening(data_dir: Path, *more: Path) -> None:
    """Refuse, as root, when pgserver would widen a parent directory's permissions.

    Run as root, pgserver runs PostgreSQL as the user ``pgserver`` and makes every parent
    of the data directory and of its own binaries readable and traversable by all
    (``chmod g+rx,o+rx``): a private home directory would become listable by every user.

    Raises:
        ConfigError: Naming the directories that are not already ``g+rx,o+rx``.
    """
    narrow: list[str] = []
    for path in (data_dir, *more):
        for parent in path.parents:
            with contextlib.suppress(FileNotFoundError):  # created later, by mkdir
                if parent.stat().st_mode & _TRAVERSE_BY_ALL != _TRAVERSE_BY_ALL:
                    narrow.append(str(parent))
    if narrow:
        listed = ", ".join(f"`{p}`" for p in dict.fromkeys(narrow))
        msg = (
            "dev postgres: run as root, pgserver runs PostgreSQL as the user `pgserver` and "
            f"would make {listed} readable and traversable by every user (chmod g+rx,o+rx); "
            "run `thalweg dev postgres` as an ordinary user, or pass a `--data-dir` whose "
            "parent directories already are"
        )
        raise ConfigError(msg)


def seal_socket(server: Any, data_dir: Path) -> None:
    """Check the running server's socket is in ``data_dir`` (0700), and make it 0700 too.

    Raises:
        ConfigError: When the socket is elsewhere, or the directory is open to others.
    """
    socket_dir = server.get_postmaster_info().socket_dir
    if socket_dir is None or Path(socket_dir).resolve() != data_dir:
        msg = (
            f"dev postgres: expected the server's socket in `{data_dir}`; got `{socket_dir}`; "
            "stopped it (pass a shorter `--data-dir`)"
        )
        raise ConfigError(msg)
    mode = stat.S_IMODE(data_dir.stat().st_mode)
    if mode & ~_OWNER_ONLY:
        msg = (
            f"dev postgres: expected the data directory `{data_dir}` to be 0700; got "
            f"{mode:04o}; stopped the server (`chmod 700` it, or pass another `--data-dir`)"
        )
        raise ConfigError(msg)
    socket = data_dir / _SOCKET_NAME
    os.chmod(socket, stat.S_IMODE(socket.stat().st_mode) & _OWNER_ONLY)
