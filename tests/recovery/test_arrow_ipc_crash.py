"""SIGKILL flows writing and reading Arrow IPC directories, resume: every record once.

``tests/recovery/arrow_ipc_crash_flow.py`` runs under ``python -m bytewax.run`` with a
recovery directory and an epoch per activation. The writing flow (sample orders → raw
Parquet lane and ``ArrowIPCSink``) is killed in turn before an epoch's commit, in the
middle of an epoch's writes, after the commit (before the recovery store has the
epoch), and inside the IPC sink's finalize, then resumed to the end: after every kill
no record is in the directory twice and no partial file is visible; at the end the
directory holds exactly the raw lane's records by record id. The reading flow
(``ArrowIPCSource`` → Parquet lane) is killed after a commit and resumed the same way,
also over a directory the killed writer left in several files per source partition,
read by two workers: each source partition reaches the lane in offset order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from tests.fixtures.crash import CrashHarness
from tests.recovery.arrow_ipc_crash_flow import ORDERS
from thalweg_bytewax.lanes import read_lane

pytestmark = pytest.mark.slow

RID = "_twg_record_id"
KILLS = [
    "epoch_sink.before_commit:3",
    "epoch_sink.mid_write:5",
    "epoch_sink.after_commit:2",
    "arrow_ipc.before_finalize:2",
    "arrow_ipc.after_finalize:1",
]


def ipc_record_ids(directory: Path) -> list[bytes]:
    """Every record id in the finalized files, read as another process would."""
    ids: list[bytes] = []
    for path in sorted(directory.rglob("*.arrow*")):
        if path.name.startswith("."):
            continue
        with pa.memory_map(str(path)) as f:  # raises on a partial or truncated file
            reader = ipc.open_file(f) if path.suffix == ".arrow" else ipc.open_stream(f)
            ids.extend(reader.read_all().column(RID).to_pylist())
    return ids


def assert_no_record_twice(ids: list[bytes]) -> None:
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} records landed twice"


@pytest.mark.parametrize(("fmt", "workers"), [("file", 1), ("file", 2), ("stream", 1)])
def test_the_sink_killed_at_each_point_and_resumed_holds_every_record_once(
    crash: CrashHarness, tmp_path: Path, fmt: str, workers: int
) -> None:
    spec = f"tests.recovery.arrow_ipc_crash_flow:build_flow({str(tmp_path)!r}, {fmt!r})"
    flow = crash.flow(spec, "-w", str(workers))
    for fault in KILLS:
        flow.killed_at(fault)
        assert_no_record_twice(ipc_record_ids(tmp_path / "ipc"))
    flow.finishes()
    held = ipc_record_ids(tmp_path / "ipc")
    assert_no_record_twice(held)
    raw = read_lane(tmp_path / "raw", [RID]).column(0).to_pylist()
    assert len(raw) == ORDERS and len(set(raw)) == ORDERS
    assert sorted(held) == sorted(raw)
    assert not list((tmp_path / "ipc").rglob(".staging-*"))


def test_the_source_killed_after_a_commit_and_resumed_copies_every_record_once(
    crash: CrashHarness, tmp_path: Path
) -> None:
    # Written in one epoch (no recovery): a file per source partition of several batches,
    # so the reading flow, one epoch per activation, takes several epochs per file.
    spec = f"tests.recovery.arrow_ipc_crash_flow:build_flow({str(tmp_path)!r})"
    crash.command([sys.executable, "-m", "bytewax.run", spec]).finishes()
    written = ipc_record_ids(tmp_path / "ipc")
    assert len(written) == ORDERS
    assert len([p for p in (tmp_path / "ipc").rglob("*.arrow") if p.name[0] != "."]) == 4

    read = crash.flow(
        f"tests.recovery.arrow_ipc_crash_flow:read_flow({str(tmp_path)!r})",
        recovery=tmp_path / "read",
    )
    for fault in ("epoch_sink.after_commit:2", "epoch_sink.mid_write:2"):
        read.killed_at(fault)
    partial = read_lane(tmp_path / "copy", [RID]).column(0).to_pylist()
    assert 0 < len(partial) < ORDERS, "the kills should fall mid-stream"
    read.finishes()
    copied = read_lane(tmp_path / "copy", [RID]).column(0).to_pylist()
    assert len(copied) == len(set(copied)) == ORDERS
    assert sorted(copied) == sorted(written)


def test_a_directory_written_across_kills_is_copied_in_offset_order_once(
    crash: CrashHarness, tmp_path: Path
) -> None:
    # Killed and resumed, the writer leaves several files per source partition (an epoch
    # each); the reader, killed too, takes each partition's files in offset order, as
    # the Parquet lane it copies into requires.
    spec = f"tests.recovery.arrow_ipc_crash_flow:build_flow({str(tmp_path)!r})"
    write = crash.flow(spec)
    for fault in ("epoch_sink.after_commit:3", "arrow_ipc.after_finalize:2"):
        write.killed_at(fault)
    write.finishes()
    written = ipc_record_ids(tmp_path / "ipc")
    assert len(written) == len(set(written)) == ORDERS
    per_partition = [p for p in (tmp_path / "ipc").glob("*/*") if p.is_dir()]
    assert all(len(list(d.glob("[0-9]*.arrow"))) > 1 for d in per_partition)

    read = crash.flow(
        f"tests.recovery.arrow_ipc_crash_flow:read_flow({str(tmp_path)!r})",
        "-w",
        "2",  # two workers: a source partition's files must not be split between them
        recovery=tmp_path / "read",
    )
    read.killed_at("epoch_sink.after_commit:2")
    read.finishes()
    lane = read_lane(tmp_path / "copy", [RID])
    assert sorted(lane.column(0).to_pylist()) == sorted(written)
