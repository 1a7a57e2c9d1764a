"""Kill a FileSource -> ParquetSink batch run mid-file, resume it: each row lands once.

The run reads three NDJSON and CSV files (state = next row index per file) into a
Parquet lane with a recovery directory; it is SIGKILLed mid-file (by the sink's fault
hook at a finalize, and from outside at an arbitrary moment), then resumed to the end.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.fixtures.crash import CrashHarness
from thalweg_bytewax.lanes import read_lane

pytestmark = pytest.mark.slow

ROWS = 3000


def make_files(root: Path) -> set[tuple[str, int]]:
    root.mkdir()
    expected = set()
    for k in range(3):
        if k == 1:
            path = root / f"part-{k}.csv"
            path.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(ROWS)))
        else:
            path = root / f"part-{k}.ndjson"
            path.write_text(
                "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(ROWS))
            )
        expected |= {(str(path), i) for i in range(ROWS)}
    return expected


FLOW = "tests.recovery.files_crash_flow:flow"


def files_env(files: Path, lane: Path, **extra: str) -> dict[str, str]:
    return {"THALWEG_FILES": str(files / "part-*"), "THALWEG_LANE": str(lane), **extra}


def assert_each_row_once(lane: Path, expected: set[tuple[str, int]]) -> None:
    t = read_lane(lane, ["_twg_source_topic", "_twg_source_offset"])
    seen = list(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicate rows"
    assert set(seen) == expected, f"{len(expected - set(seen))} rows missing"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, set[tuple[str, int]]]:
    expected = make_files(tmp_path / "files")
    return tmp_path / "files", tmp_path / "lane", expected


def test_fault_kill_mid_file_then_resume_lands_each_row_once(setup, crash: CrashHarness) -> None:
    files, lane, expected = setup
    # A longer pause per batch spreads the run over enough one-second epochs that the
    # third finalize comes before the files are done (at 0.1 s the run ended first).
    flow = crash.flow(FLOW, snapshot_s=1, env=files_env(files, lane, THALWEG_DELAY_S="0.4"))
    flow.killed_at("parquet.before_finalize:3")
    before = read_lane(lane).num_rows if any(lane.rglob("*.parquet")) else 0
    assert 0 < before < len(expected), "the kill should fall mid-run"
    flow.finishes()
    assert_each_row_once(lane, expected)


def test_external_sigkill_then_resume_lands_each_row_once(setup, crash: CrashHarness) -> None:
    files, lane, expected = setup
    slowed = crash.flow(FLOW, snapshot_s=1, env=files_env(files, lane, THALWEG_DELAY_S="0.3"))
    proc = slowed.start()
    time.sleep(3.0)  # an arbitrary moment from outside, not a named point
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = read_lane(lane).num_rows if any(lane.rglob("*.parquet")) else 0
    assert before < len(expected), "the kill should fall before the end"
    crash.flow(FLOW, snapshot_s=1, env=files_env(files, lane, THALWEG_DELAY_S="0")).finishes()
    assert_each_row_once(lane, expected)
