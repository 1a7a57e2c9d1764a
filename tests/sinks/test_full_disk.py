"""A Parquet lane on a full disk ends the run with the sink's error, not an abort.

Bytewax closes a sink's partitions while it unwinds from the failed write; a close that
raised then (the writer threads' failures, met again) made the process abort in a
destructor before the error was printed. The run must end with exit code 1 and the
sink error naming the OS reason as the last line of stderr.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZE = 2 * 1024 * 1024


@contextlib.contextmanager
def _small_filesystem(tmp_path: Path) -> Iterator[tuple[Path, str, str, Callable[[], None] | None]]:
    """A 2 MiB file system (tmpfs, as root), else a 2 MiB file size limit.

    Yields the directory, the sink error and OS reason the writes then fail with, and
    the ``preexec_fn`` of the run.
    """
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)],
        capture_output=True, check=False,
    ).returncode == 0  # fmt: skip
    if mounted:
        try:
            yield mount, "SinkTransientError", "No space left on device", None
        finally:
            subprocess.run(["umount", str(mount)], check=False)
        return

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE, SIZE))

    yield mount, "SinkTerminalError", "File too large", limit


@pytest.mark.slow
def test_a_full_disk_ends_the_run_with_the_sink_error(tmp_path: Path) -> None:
    with _small_filesystem(tmp_path) as (where, error, reason, preexec):
        lane = where / "lane"
        env = {**os.environ, "RUST_BACKTRACE": "1", "THALWEG_TEST_LANE": str(lane)}
        done = subprocess.run(
            [sys.executable, "-m", "bytewax.run", "tests.sinks.full_disk_flow:flow"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
            preexec_fn=preexec,  # noqa: PLW1509 - sets a limit, no threads yet
        )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]  # not an abort (134 / -6)
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert last.startswith(f"thalweg: {error}: parquet sink `{lane}`: "), last
    assert reason in last
