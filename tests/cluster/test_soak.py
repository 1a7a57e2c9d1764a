"""``benchmarks/soak.py`` for a minute: the long-run harness keeps working.

The same harness the half-hour soak in docs/operations.md runs, cut short: the orders
flow as a cluster of two ``thalweg cluster`` pods tailing a topic a producer thread
fills, process 1 SIGKILLed (once or twice, as start-up allows) and both restarted,
samples of every process, and at the end the tables checked against what was
produced — every order and every order line exactly once, the raw lane too. The RSS
limit is left out: a minute is all warm-up.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_kills_resumes_and_lands_every_order_exactly_once(
    kafka_bootstrap: str, make_topic: Callable[[], str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "1"]
    argv += ["--rate", "100", "--kill-every-s", "10", "--snapshot-s", "2", "--sample-s", "2"]
    argv += ["--settle-s", "5", "--max-rss-growth", "1000", "--drain-timeout-s", "150"]
    argv += ["--bootstrap", kafka_bootstrap, "--topic", make_topic(), "--out", str(out)]
    argv += ["--work", str(tmp_path / "work")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=420, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    tables = summary["tables"]
    assert summary["kills"] >= 1  # one more when start-up is quick
    assert tables["produced"] > 0
    assert tables["orders_rows"] == tables["orders_distinct_ids"] == tables["produced"]
    assert tables["order_lines_rows"] == tables["order_lines_expected"]
    assert tables["raw_rows"] == tables["raw_distinct_offsets"] == tables["produced"]
    assert tables["dlq_rows"] == 0 and tables["dlq_reasons"] == {}
    assert summary["exactly_once"] and summary["lag_ok"]
    assert summary["lag"]["lag_end"] == 0
    # Each pod's tables, with the snapshots they kept (a minute stays under the bound).
    for table in ("orders", "order_lines"):
        assert len(tables["snapshots_kept"][table]) == 2
        assert all(0 < n <= 112 for n in tables["snapshots_kept"][table])

    with (out / "samples.csv").open() as f:
        samples = list(csv.DictReader(f))
    for process in ("0", "1"):
        mine = [s for s in samples if s["process"] == process and s["rss_mb"]]
        assert mine, f"no sample of process {process}"
        assert all(float(s["rss_mb"]) > 0 and int(s["threads"]) > 0 for s in mine)
    # Every life of each process was sampled: its pid changed with each restart.
    pids = {s["pid"] for s in samples if s["process"] == "1" and s["pid"]}
    assert len(pids) == summary["kills"] + 1
    assert (out / "soak.svg").read_text().startswith("<svg")
    events = (out / "events.csv").read_text()
    assert "SIGKILL process 1" in events and "process 0 ended on its own" in events
