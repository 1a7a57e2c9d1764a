"""``benchmarks/soak.py --plot``: a committed run's numbers come back from its samples.

The operations docs quote each soak's RSS slopes and verdict from its ``summary.json``;
redrawing recomputes them from ``samples.csv`` and ``events.csv``, so the committed
numbers are the samples' and not edited by hand, and the docs' paragraphs on the newest
runs and on the run without kills must carry their summaries' counts, growths and
verdicts. An empty directory is refused with a message, not a traceback.
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


QUOTED = [
    # (run, the paragraph's opening words, the next paragraph's)
    ("soak-coalesced-stage-5", "**The newest run**", "**The fourth run with the stage"),
    ("soak-coalesced-stage-4", "**The fourth run with the stage", "**The third run with the"),
    ("soak-coalesced-stage-3", "**The third run with the stage", "**The second run with the"),
    ("soak-coalesced-stage-2", "**The second run with the stage", "**The first run with the"),
    ("soak-coalesced-stage", "**The first run with the stage", "**With 256 KiB fetches"),
    ("soak-fetch-256k", "**With 256 KiB fetches", "**One life, no kill**"),
    ("soak-one-life", "**One life, no kill**", "**The run before it**"),
]
"""The runs whose summary the operations docs quote, and where each paragraph is."""


def _block(start: str, end: str) -> str:
    """The operations docs' paragraph from ``start`` up to ``end``."""
    docs = (ROOT / "docs" / "operations.md").read_text()
    first = docs.index(start)
    return docs[first : docs.index(end, first)]


@pytest.mark.parametrize(("run", "start", "end"), QUOTED)
def test_the_docs_quote_a_run_as_its_summary_has_it(run: str, start: str, end: str) -> None:
    summary = json.loads((RUNS / run / "summary.json").read_text())
    block = _block(start, end)
    assert f"benchmarks/{run}/summary.json" in block
    assert summary["tables"]["exactly_once"] and summary["lag_ok"]
    assert f"{summary['tables']['produced']:,} orders produced" in block
    assert f"{summary['lag']['lag_max']:,} at" in block
    assert f"{summary['kills']} kill" in block or (summary["kills"] == 0 and "no kill" in block)
    bound = summary["max_rss_growth_pct"]
    for name, memory in summary["memory"].items():
        if name == "window_s":
            continue
        growth = memory["rss_growth_pct_over_window"]
        assert f"{growth:+.2f} %" in block.replace("−", "-"), name
    verdict = "met for both processes" if summary["rss_ok"] else "not met for process"
    assert f"RSS over the last 20 minutes: {verdict}" in block
    assert summary["rss_ok"] == all(
        abs(m["rss_growth_pct_over_window"]) <= bound
        for k, m in summary["memory"].items()
        if k != "window_s"
    )


def test_plot_without_a_run_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert soak_module().main(["--plot", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "has no samples.csv, events.csv, summary.json" in err
    assert "run without --plot to soak" in err
