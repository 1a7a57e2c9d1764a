"""`thalweg dev postgres` keeps its trust-authenticated socket where only its owner reaches it.

The server trusts every connection on its Unix socket, so the socket must stay in the
0700 data directory: a data path too long for a socket path is refused (pgserver would
fall back to a shared runtime directory with a 0777 socket), and no parent directory's
mode is widened on the way.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import platformdirs
import pytest

from thalweg_bytewax.dev._postgres import check_no_widening
from thalweg_bytewax.errors import ConfigError

THALWEG = [sys.executable, "-m", "thalweg_bytewax.cli"]
SOCKET = ".s.PGSQL.5432"


def _modes(path: Path) -> dict[Path, int]:
    """The mode of every existing parent of ``path``."""
    return {p: stat.S_IMODE(p.stat().st_mode) for p in path.parents if p.exists()}


def _runtime_entries() -> set[str]:
    """What pgserver's fallback socket directory holds (one directory per data path)."""
    with warnings.catch_warnings():  # XDG_RUNTIME_DIR unset: the /tmp fallback, as pgserver's
        warnings.simplefilter("ignore")
        runtime = platformdirs.user_runtime_path("python_PostgresServer")
    return set(os.listdir(runtime)) if runtime.is_dir() else set()


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    out, _ = proc.communicate(timeout=60)
    return out


def test_a_data_path_too_long_for_a_socket_is_refused(open_dir: Path) -> None:
    """No socket in a shared runtime directory, no parent widened: a clear refusal."""
    data_dir = open_dir / ("d" * 60) / ("e" * 60) / "postgres"
    data_dir.parent.mkdir(parents=True)
    assert len(str(data_dir / SOCKET)) > 108  # noqa: PLR2004 - Linux's sun_path
    before, runtime_before = _modes(data_dir), _runtime_entries()
    proc = subprocess.Popen(
        [*THALWEG, "dev", "postgres", "--data-dir", str(data_dir), "--dsn-file", "dsn"],
        cwd=open_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # it started a server: stop it, then report
        code = None
    out = _stop(proc)
    assert code == 2, out  # noqa: PLR2004 - the usage exit code
    assert "too long for a Unix socket" in out and "--data-dir" in out
    assert _runtime_entries() == runtime_before
    assert _modes(data_dir) == before
    assert not data_dir.exists()


def test_a_parent_root_would_widen_is_named_and_refused(tmp_path: Path) -> None:
    """pgserver, run as root, would chmod a private parent g+rx,o+rx: named, refused."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    with pytest.raises(ConfigError, match="chmod g\\+rx,o\\+rx") as info:
        check_no_widening(private / "pg" / "postgres")
    assert f"`{private}`" in str(info.value)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700  # noqa: PLR2004


@pytest.mark.postgres
def test_the_socket_stays_private_in_the_data_directory(open_dir: Path) -> None:
    """The socket is in the 0700 data directory, is 0700 itself, and no parent changed."""
    import psycopg

    data_dir = open_dir / "pg"
    before, runtime_before = _modes(data_dir), _runtime_entries()
    proc = subprocess.Popen(
        [*THALWEG, "dev", "postgres", "--data-dir", str(data_dir), "--dsn-file", "dsn"],
        cwd=open_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        dsn = subprocess.run(
            [*THALWEG, "dev", "postgres", "--print-dsn", "--dsn-file", "dsn", "--wait-s", "60"],
            cwd=open_dir,
            capture_output=True,
            text=True,
            timeout=90,
            check=True,
        ).stdout.strip()
        assert f"host={data_dir}" in dsn
        socket = data_dir / SOCKET
        assert stat.S_ISSOCK(socket.stat().st_mode)
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700  # noqa: PLR2004
        assert stat.S_IMODE(socket.stat().st_mode) & 0o077 == 0
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchall() == [(1,)]
    finally:
        _stop(proc)
    assert _modes(data_dir) == before
    assert _runtime_entries() == runtime_before
