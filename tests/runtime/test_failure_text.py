"""A run that fails inside Bytewax ends with the thalweg error, readable on its own.

Bytewax prints a Rust panic (with ``RUST_BACKTRACE`` set, dozens of frames) and ends
its traceback with its own ``BytewaxRuntimeError``; the thalweg error that caused it
must still be the last line of stderr, whole, under ``python -m bytewax.run`` and under
the ``thalweg`` commands that run a flow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from thalweg_bytewax._excepthook import summary_line, thalweg_cause
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

ROOT = Path(__file__).resolve().parents[2]
FLOW = "tests.runtime.failing_flow:flow"


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**clean, "RUST_BACKTRACE": "1", **env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.strip()][-1]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_python_m_bytewax_run_ends_with_the_thalweg_error(tmp_path: Path, workers: int) -> None:
    missing = tmp_path / "none.ndjson"
    done = _run(["-m", "bytewax.run", FLOW, "-w", str(workers)], THALWEG_TEST_FILES=str(missing))
    assert done.returncode == 1
    assert "BytewaxRuntimeError" in done.stderr  # Bytewax's own text is there, before ours
    assert _last_line(done.stderr) == (
        f"thalweg: SourceError: file source: cannot read `{missing}`: expected an existing file;"
        " got none there (check the path, or use a glob to allow no match)"
    ), done.stderr[-2000:]


@pytest.mark.slow
def test_a_thalweg_command_running_a_flow_ends_with_the_thalweg_error(tmp_path: Path) -> None:
    missing = tmp_path / "none.ndjson"
    argv = [
        "-m", "thalweg_bytewax.cli", "batch", str(ROOT / "thalweg_bytewax" / "flows" / "orders.toml"),
        "--files", str(missing), "--format", "ndjson", "--set", f"data_dir={tmp_path / 'd'}",
        "--no-progress",
    ]  # fmt: skip
    done = _run(argv)
    assert done.returncode == 1
    assert "panicked at" in done.stderr
    assert _last_line(done.stderr) == (
        f"thalweg: SourceError: file source: cannot read `{missing}`: expected an existing file;"
        " got none there (check the path, or use a glob to allow no match)"
    ), done.stderr[-2000:]


def test_the_cause_is_found_through_wrapping_errors() -> None:
    inner = SinkTerminalError("sink: refused; fix it")
    try:
        try:
            raise inner
        except SinkTerminalError as exc:
            raise RuntimeError("error writing output batch") from exc
    except RuntimeError as outer:
        assert thalweg_cause(outer) is inner
    assert thalweg_cause(RuntimeError("plain")) is None
    assert summary_line(ConfigError("x: expected y")) == "thalweg: ConfigError: x: expected y"
