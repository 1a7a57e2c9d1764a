"""``benchmarks/soak.py --plot``: a committed run's numbers come back from its samples.

The operations docs quote each soak's RSS slopes and verdict from its ``summary.json``;
redrawing recomputes them from ``samples.csv`` and ``events.csv``, so the committed
numbers are the samples' and not edited by hand. An empty directory is refused with a
message, not a traceback.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "benchmarks"


def soak_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak_harness", ROOT / "benchmarks" / "soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "run", sorted(p.name for p in RUNS.glob("soak*") if (p / "samples.csv").exists())
)
def test_redrawing_a_committed_run_gives_back_its_numbers(tmp_path: Path, run: str) -> None:
    out = tmp_path / run
    shutil.copytree(RUNS / run, out)
    committed = json.loads((out / "summary.json").read_text())
    assert soak_module().main(["--plot", "--out", str(out)]) == 0
    redrawn = json.loads((out / "summary.json").read_text())
    assert redrawn["memory"] == committed["memory"]
    assert redrawn["rss_ok"] == committed["rss_ok"]
    assert (out / "soak.svg").read_text().startswith("<svg")


def test_the_newest_run_is_within_the_bound_on_both_processes() -> None:
    summary = json.loads((RUNS / "soak-heap-trim" / "summary.json").read_text())
    growths = [
        v["rss_growth_pct_over_window"] for k, v in summary["memory"].items() if k != "window_s"
    ]
    assert len(growths) == 2
    assert all(abs(g) <= summary["max_rss_growth_pct"] for g in growths)
    assert summary["tables"]["exactly_once"] and summary["lag_ok"]


def test_plot_without_a_run_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert soak_module().main(["--plot", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "has no samples.csv, events.csv, summary.json" in err
    assert "run without --plot to soak" in err
