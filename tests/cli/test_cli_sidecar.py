"""`thalweg sidecar serve MODULE:FUNCTION`: a flow's flight_transform calls it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import thalweg_bytewax.operators as twg
from tests.fixtures.crash import ROOT, flow_env
from tests.helpers import raw_batch, run_flow
from thalweg_bytewax.cli import main


@pytest.mark.slow
def test_a_served_function_answers_a_flows_batches() -> None:
    argv = [sys.executable, "-m", "thalweg_bytewax.cli", "sidecar", "serve"]
    argv += ["tests.cli.sidecar_functions:with_length", "--port", "0"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=flow_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving tests.cli.sidecar_functions:with_length at grpc://"), line
        location = line.split(" at ")[1].strip()
        items = [("t:0", raw_batch("t", 0, range(4)))]
        out = run_flow(
            items,
            lambda up: twg.flight_transform("score", up, location=location),
            flow_id="cli",
        )
        ((_, batch),) = out["ok"]
        assert batch.column("length").to_pylist() == [2, 2, 2, 2]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # closes its standard output


def test_a_bad_function_spec_exits_2_saying_what_to_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sidecar", "serve", "no_colon_here"]) == 2
    assert "expected MODULE:FUNCTION" in capsys.readouterr().err
    assert main(["sidecar", "serve", "tests.cli.sidecar_functions:missing"]) == 2
    assert "has no function `missing`" in capsys.readouterr().err
