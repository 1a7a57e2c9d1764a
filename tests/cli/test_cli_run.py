"""``thalweg run NAME``: a flow that ships with the package, from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.cli._common import load_flow
from thalweg_bytewax.cli._run import runner_argv
from thalweg_bytewax.flows import BUNDLED


def test_the_runner_gets_the_options_and_the_bundled_module() -> None:
    argv = runner_argv("orders", ["-w", "2"])
    assert argv == [sys.executable, "-m", "bytewax.run", "-w", "2", "thalweg_bytewax.flows.orders"]


def test_a_bundled_flow_is_a_flow_module_by_its_name_too() -> None:
    assert BUNDLED == {
        "orders": "thalweg_bytewax.flows.orders",
        "pipeline": "thalweg_bytewax.flows.pipeline",
    }
    assert load_flow("check", "orders").flow_id == "orders"


@pytest.mark.slow
def test_thalweg_run_pipeline_runs_the_toml_file_outside_a_checkout(tmp_path: Path) -> None:
    # The starter `thalweg init` writes, its sample's size set by a variable: no checkout.
    thalweg = Path(sys.executable).with_name("thalweg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    subprocess.run([str(thalweg), "init", "shop.toml"], cwd=tmp_path, env=env, check=True)
    done = subprocess.run(
        [str(thalweg), "run", "pipeline"],
        cwd=tmp_path,
        env={**env, "THALWEG_CONFIG": "shop.toml", "THALWEG_SOURCE__COUNT": "120"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "  raw lane thalweg-data/raw: 120 records (+120)" in done.stdout, done.stdout


@pytest.mark.slow
def test_thalweg_run_orders_runs_the_flagship_outside_a_checkout(tmp_path: Path) -> None:
    # No `flows/` here: what an installed package offers, whatever the directory.
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    thalweg = Path(sys.executable).with_name("thalweg")
    done = subprocess.run(
        [str(thalweg), "run", "orders"],
        cwd=tmp_path,
        env={**env, "THALWEG_SAMPLE_ORDERS": "300"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "  raw lane thalweg-data/raw: 300 records (+300)" in done.stdout, done.stdout
    assert "table sales.orders (iceberg thalweg-data/warehouse)" in done.stdout
