"""The epoch-sink protocol, proven with a tiny real sink partition built on the base.

Staged writes are invisible until ``snapshot()`` and durable after it; a failed write or
commit sets the failed flag and the partition never publishes again; ``close()`` never
publishes; replays are skipped by coverage and checked by record id; rows of another
shard's source partition are refused; and a flow SIGKILLed between ``write_batch`` and
``snapshot()`` or right after ``snapshot()`` resumes with every row exactly once.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, run_main

from tests.fixtures.crash import CrashHarness
from tests.runtime.jsonl_sink import JsonlSink, items, read_rows, rows
from thalweg_bytewax.coverage import _replay_check
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, SinkTransientError
from thalweg_bytewax.runtime.parts import route


def part(tmp_path: Path, resume: dict[str, int] | None = None, shards: int = 1, shard: int = 0):
    sink = JsonlSink(tmp_path / "out", shards=shards)
    return sink, sink.build_part("flow.out", str(shard), resume)


def test_a_staged_write_is_invisible_before_snapshot_and_durable_after(tmp_path: Path) -> None:
    _, p = part(tmp_path)
    p.write_batch([rows("t", 0, [0, 1, 2]), rows("t", 1, [0])])
    assert read_rows(tmp_path / "out") == []  # staged only
    state = p.snapshot()
    assert state == {"t:0": 3, "t:1": 1}
    assert [r[:3] for r in read_rows(tmp_path / "out")] == [
        ("t", 0, 0), ("t", 0, 1), ("t", 0, 2), ("t", 1, 0)
    ]
    assert p.stats.rows_written == 4 and p.stats.epochs_committed == 1
    # A later epoch extends the coverage; the state is the next offset per partition.
    p.write_batch([rows("t", 0, [3, 4])])
    assert p.snapshot() == {"t:0": 5, "t:1": 1}
    cov = p.coverage("t:0")
    assert cov is not None and cov.spans == ((0, 4),)


def test_a_failed_write_sets_the_flag_and_snapshot_refuses_to_publish(tmp_path: Path) -> None:
    sink, p = part(tmp_path)
    p.write_batch([rows("t", 0, [0, 1])])
    sink.fail_stage = True
    with pytest.raises(SinkTransientError):
        p.write_batch([rows("t", 0, [2, 3])])
    assert p.failed and p.aborted == 1
    sink.fail_stage = False
    with pytest.raises(SinkTerminalError, match=r"cannot commit an epoch after a failed write"):
        p.snapshot()
    with pytest.raises(SinkTerminalError, match=r"cannot write after a failed write"):
        p.write_batch([rows("t", 0, [4])])
    p.close()
    assert read_rows(tmp_path / "out") == []  # the rows staged before the failure too
    assert p.released == 1


def test_a_refused_batch_also_fails_the_partition(tmp_path: Path) -> None:
    _, p = part(tmp_path)
    p.write_batch([rows("t", 0, [0])])
    with pytest.raises(ConfigError, match="locator columns"):
        p.write_batch([pa.RecordBatch.from_pydict({"x": [1]})])
    assert p.failed
    with pytest.raises(SinkTerminalError):
        p.snapshot()
    assert read_rows(tmp_path / "out") == []


def test_a_failed_commit_fails_the_partition(tmp_path: Path) -> None:
    sink, p = part(tmp_path)
    p.write_batch([rows("t", 0, [0])])
    sink.fail_commit = True
    with pytest.raises(SinkTransientError, match="commit failed"):
        p.snapshot()
    sink.fail_commit = False
    assert p.failed and p.aborted == 1
    with pytest.raises(SinkTerminalError):
        p.snapshot()
    assert read_rows(tmp_path / "out") == []


def test_close_never_publishes(tmp_path: Path) -> None:
    _, p = part(tmp_path)
    p.write_batch([rows("t", 0, [0, 1])])
    p.snapshot()
    p.write_batch([rows("t", 0, [2, 3])])
    p.close()  # a clean finish snapshots first; close() alone publishes nothing
    assert [r[2] for r in read_rows(tmp_path / "out")] == [0, 1]
    assert p.released == 1


def test_a_resumed_partition_skips_what_the_target_and_the_state_cover(tmp_path: Path) -> None:
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, list(range(10)))])
    first.snapshot()
    # The state lags (the crash fell between the sink's commit and the recovery store's).
    _, again = part(tmp_path, resume={"t:0": 4})
    again.write_batch([rows("t", 0, list(range(4, 12)))])
    assert again.stats.rows_skipped_replay == 6
    assert again.snapshot() == {"t:0": 12}
    assert [r[2] for r in read_rows(tmp_path / "out")] == list(range(12))
    # Offsets below the resume state count as held even with no file (retention).
    _, third = part(tmp_path / "elsewhere", resume={"u:0": 5})
    third.write_batch([rows("u", 0, [3, 4, 5])])
    third.snapshot()
    assert [r[2] for r in read_rows(tmp_path / "elsewhere" / "out")] == [5]


def test_a_replay_that_differs_by_record_id_is_refused(tmp_path: Path) -> None:
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, list(range(5)))])
    first.snapshot()
    _, again = part(tmp_path)
    with pytest.raises(SinkTerminalError, match=r"holds a different record at offset 0") as info:
        again.write_batch([rows("t", 0, list(range(5)), tag="new")])
    assert "directory `" in str(info.value) and "point the sink at a new target" in str(info.value)
    assert [r[3] for r in read_rows(tmp_path / "out")] == [f"v{o}" for o in range(5)]
    # The same below a resumed state, where the read-back also checks for held rows.
    _, resumed = part(tmp_path, resume={"t:0": 5})
    with pytest.raises(SinkTerminalError, match=r"holds a different record at offset 2"):
        resumed.write_batch([rows("t", 0, [2, 3], tag="new")])


def test_rows_of_another_shards_partition_are_refused_before_any_is_staged(
    tmp_path: Path,
) -> None:
    mine = next(f"t:{i}" for i in range(50) if route(f"t:{i}", 2) == 0)
    other = next(f"t:{i}" for i in range(50) if route(f"t:{i}", 2) == 1)
    _, p = part(tmp_path, shards=2, shard=0)
    batch = pa.concat_batches(
        [rows("t", int(mine[2:]), [0, 1]), rows("t", int(other[2:]), [0])]
    )
    with pytest.raises(ConfigError, match=rf"rows of `{other}` reached shard 0 but"):
        p.write_batch([batch])
    assert p.staged == {}


def test_rows_going_back_in_offset_order_are_refused(tmp_path: Path) -> None:
    _, p = part(tmp_path)
    p.write_batch([rows("t", 0, [5, 6])])
    with pytest.raises(ConfigError, match=r"out of offset order \(offset 2 after 6\)"):
        p.write_batch([rows("t", 0, [2])])


def test_a_row_held_across_a_resume_below_the_committed_offsets_is_refused_not_skipped(
    tmp_path: Path,
) -> None:
    # Offsets 0-4 and 6-10 are committed; a step before the sink still holds offset 5.
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, [0, 1, 2, 3, 4])])
    first.snapshot()
    first.write_batch([rows("t", 0, [6, 7, 8, 9, 10])])
    assert first.snapshot() == {"t:0": 11}
    # After a resume the held row comes first, inside the resumed coverage.
    _, again = part(tmp_path, resume={"t:0": 11})
    refused = r"rows of `t:0` from offset 5 \(1 in this batch\) arrived after a resume"
    with pytest.raises(ConfigError, match=refused):
        again.write_batch([rows("t", 0, [5])])
    assert again.stats.rows_skipped_replay == 0 and again.staged == {}
    assert [r[2] for r in read_rows(tmp_path / "out")] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]


def record_reads(p: Any) -> list[tuple[int, int]]:
    """The ranges ``p`` reads its target back over, from now on, in order."""
    asked: list[tuple[int, int]] = []
    read_back = p.held_record_ids

    def recording(key: str, first: int, last: int) -> pa.Table | None:
        asked.append((first, last))
        return read_back(key, first, last)

    p.held_record_ids = recording
    return asked


def test_rows_below_the_resumed_state_that_the_target_holds_are_skipped_as_replays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, list(range(10)))])
    first.snapshot()
    # A source that rewinds below the resumed state replays what the target holds.
    _, again = part(tmp_path, resume={"t:0": 10})
    asked = record_reads(again)
    again.write_batch([rows("t", 0, [3, 4, 5])])
    again.write_batch([rows("t", 0, list(range(6, 13)))])
    assert again.stats.rows_skipped_replay == 7  # noqa: PLR2004
    # The replay is read back once, up to the resumed offsets, not once per batch.
    assert asked == [(3, 9)]
    again.snapshot()
    assert [r[2] for r in read_rows(tmp_path / "out")] == list(range(13))
    assert "cannot be read back" not in caplog.text
    # With nothing to read back (the files are gone), they are skipped with a warning.
    _, bare = part(tmp_path / "elsewhere", resume={"u:0": 5})
    bare.write_batch([rows("u", 0, [3, 4, 5])])
    assert bare.stats.rows_skipped_replay == 2  # noqa: PLR2004
    assert "rows of `u:0` from offset 3 arrived after a resume inside the offsets" in caplog.text
    assert "cannot be read back to check them" in caplog.text


@pytest.mark.parametrize(
    ("verdict", "outcome"),
    [(1, "skipped"), (-1, "warned"), (0, "refused")],
    ids=["replaced-by-a-later-row", "key-from-another-source", "never-got-it"],
)
def test_an_upsert_target_judges_a_row_it_lacks_by_its_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, verdict: int, outcome: str
) -> None:
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, list(range(6)))])
    first.snapshot()
    # The target no longer holds offset 2, as an upsert leaves a row a later one replaced.
    done = next((tmp_path / "out" / "t" / "0").glob("*.jsonl"))
    kept = [line for line in done.read_text().splitlines() if json.loads(line)["offset"] != 2]  # noqa: PLR2004
    done.write_text("".join(f"{line}\n" for line in kept))
    _, again = part(tmp_path, resume={"t:0": 6})
    again.target_replaces_rows = True
    asked: list[list[int]] = []

    def replaced_by_key(key: str, lacking: pa.RecordBatch) -> Any:
        asked.append(lacking.column("_twg_source_offset").to_pylist())
        return np.full(lacking.num_rows, verdict, dtype=np.int8)

    again.replaced_by_key = replaced_by_key
    if outcome == "refused":
        with pytest.raises(ConfigError, match=r"rows of `t:0` from offset 2 \(1 in this batch\)"):
            again.write_batch([rows("t", 0, [1, 2, 3])])
    else:
        again.write_batch([rows("t", 0, [1, 2, 3])])
        assert again.stats.rows_skipped_replay == 3  # noqa: PLR2004
    assert asked == [[2]]  # only the row the target lacks is looked up
    warned = "rows of `t:0` from offset 2 arrived after a resume" in caplog.text
    assert warned == (outcome == "warned")


def test_a_rewind_far_below_the_resumed_state_reads_the_target_a_stretch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_replay_check, "_READ_AHEAD", 4)
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, list(range(12)))])
    first.snapshot()
    _, again = part(tmp_path, resume={"t:0": 12})
    asked = record_reads(again)
    for low in range(0, 14, 2):
        again.write_batch([rows("t", 0, [low, low + 1])])
    assert again.stats.rows_skipped_replay == 12  # noqa: PLR2004
    assert asked == [(0, 3), (4, 7), (8, 11)]
    again.snapshot()
    assert [r[2] for r in read_rows(tmp_path / "out")] == list(range(14))


def test_a_rewind_into_offsets_retention_removed_is_skipped_not_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, [0, 1, 2, 3, 4])])
    first.snapshot()
    first.write_batch([rows("t", 0, [5, 6, 7, 8, 9])])
    first.snapshot()
    (tmp_path / "out" / "t" / "0" / "0-4.jsonl").unlink()  # retention
    # A source that rewinds to offset 0: 0-4 are covered by the resumed state only.
    _, again = part(tmp_path, resume={"t:0": 10})
    again.write_batch([rows("t", 0, list(range(12)))])
    assert again.stats.rows_skipped_replay == 10  # noqa: PLR2004
    assert "rows of `t:0` from offset 0 arrived after a resume" in caplog.text
    again.snapshot()
    assert [r[2] for r in read_rows(tmp_path / "out")] == list(range(5, 12))
    # A row the target replaced by key (offset 7 gone from its file, as an upsert
    # leaves it) is named too: one warning per cause, not one per partition.
    done = tmp_path / "out" / "t" / "0" / "5-9.jsonl"
    kept = [line for line in done.read_text().splitlines() if json.loads(line)["offset"] != 7]  # noqa: PLR2004
    done.write_text("".join(f"{line}\n" for line in kept))
    assert len(done.read_text().splitlines()) == 4  # noqa: PLR2004
    caplog.clear()
    _, upsert = part(tmp_path, resume={"t:0": 12})
    upsert.target_replaces_rows = True
    upsert.write_batch([rows("t", 0, list(range(12)))])
    assert "rows of `t:0` from offset 0 arrived after a resume" in caplog.text
    assert "rows of `t:0` from offset 7 arrived after a resume" in caplog.text
    assert "replaces rows by key" in caplog.text
    # A row held back in a gap far wider than one read ahead is still refused.
    _, sparse = part(tmp_path / "sparse")
    sparse.write_batch([rows("s", 0, [0])])
    sparse.snapshot()
    sparse.write_batch([rows("s", 0, [300_000])])
    sparse.snapshot()
    _, resumed = part(tmp_path / "sparse", resume={"s:0": 300_001})
    with pytest.raises(ConfigError, match=r"rows of `s:0` from offset 7 \(1 in this batch\)"):
        resumed.write_batch([rows("s", 0, [7])])


def test_a_covered_row_the_target_lacks_above_the_resumed_state_is_skipped_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Offsets 0-4 are committed with the state; the next epoch commits 5 and 7-10 to the
    # target without 6 (held upstream, or rejected by a time-dependent rule), and the
    # process dies before the recovery store records that epoch.
    _, first = part(tmp_path)
    first.write_batch([rows("t", 0, [0, 1, 2, 3, 4])])
    assert first.snapshot() == {"t:0": 5}
    first.write_batch([rows("t", 0, [5, 7, 8, 9, 10])])
    first.snapshot()
    _, again = part(tmp_path, resume={"t:0": 5})
    again.write_batch([rows("t", 0, [5])])  # a replay the target holds
    assert "arrived after a resume" not in caplog.text
    # Offset 6 is inside the target's span 5-10 but not in the target: a rejected row
    # that passes now must stay out, a held one is lost; either way it is named.
    again.write_batch([rows("t", 0, [6, 7])])
    assert "1 rows of `t:0` at offsets 6-6 arrived after a resume inside" in caplog.text
    # Past the target's span the check ends: later rows are written as new.
    again.write_batch([rows("t", 0, [8, 9, 10, 11, 12])])
    again.snapshot()
    assert again.stats.rows_skipped_replay == 6  # noqa: PLR2004
    assert [r[2] for r in read_rows(tmp_path / "out")] == [0, 1, 2, 3, 4, 5, *range(7, 13)]


def _delay_offset_5(
    held: pa.RecordBatch | None, batch: pa.RecordBatch
) -> tuple[pa.RecordBatch | None, list[pa.RecordBatch]]:
    """Hold back the row at offset 5 until the batch after next: a step that reorders."""
    offsets = batch.column("_twg_source_offset")
    five = pc.equal(offsets, 5)
    if pc.any(five).as_py():
        return batch.filter(five), [batch.filter(pc.invert(five))]
    if held is not None and pc.min(offsets).as_py() > 10:  # noqa: PLR2004
        return None, [held, batch]
    return held, [batch]


def _delaying_flow(root: Path) -> Dataflow:
    flow = Dataflow("delaying")
    batches = [("t:0", rows("t", 0, o)) for o in ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12])]
    up = op.input("in", flow, TestingSource(batches))
    delayed = op.stateful_flat_map("delay", up, _delay_offset_5)
    op.output("out", delayed, JsonlSink(root))
    return flow


def test_a_flow_that_delays_a_row_fails_before_and_after_the_resume_and_loses_nothing(
    tmp_path: Path,
) -> None:
    root, recovery = tmp_path / "out", tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    config = RecoveryConfig(str(recovery))
    with pytest.raises(Exception, match=r"out of offset order \(offset 5 after 10\)"):
        run_main(_delaying_flow(root), epoch_interval=timedelta(0), recovery_config=config)
    committed = [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert [r[2] for r in read_rows(root)] == committed
    # Resumed, the held row comes first; skipped as a replay it would be lost for good.
    with pytest.raises(Exception, match=r"from offset 5 \(1 in this batch\) arrived after a resume"):
        run_main(_delaying_flow(root), epoch_interval=timedelta(0), recovery_config=config)
    assert [r[2] for r in read_rows(root)] == committed


def test_negative_offsets_are_refused(tmp_path: Path) -> None:
    _, p = part(tmp_path)
    with pytest.raises(ConfigError, match=r"rows of `t:0` have offset -1; expected offsets >= 0"):
        p.write_batch([rows("t", 0, [-1, 0])])


def test_a_bytewax_run_snapshots_before_close(tmp_path: Path) -> None:
    # The clean-finish path: Bytewax snapshots the last epoch, then closes.
    flow = Dataflow("clean")
    op.output("out", op.input("in", flow, TestingSource(items(batches=2))), JsonlSink(tmp_path))
    run_main(flow)
    assert len(read_rows(tmp_path)) == 2 * 2 * 5


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["epoch_sink.before_commit:5", "epoch_sink.after_commit:5"])
def test_kill_between_write_and_snapshot_or_after_snapshot_then_resume_is_exactly_once(
    crash: CrashHarness, fault: str
) -> None:
    root = crash.root / "out"
    argv = [sys.executable, "-m", "tests.runtime.jsonl_sink", str(root)]
    flow = crash.command([*argv, str(crash.init_recovery())])
    flow.killed_at(fault)
    before = read_rows(root)
    expected = sorted(("t", p, o, f"v{o}") for p in range(2) for o in range(8 * 5))
    assert 0 < len(before) < len(expected), "the kill should fall mid-stream"
    assert len(before) == len(set(before))
    flow.finishes()
    got = read_rows(root)
    assert len(got) == len(set(got)), "a row was published twice"
    assert got == expected, "rows lost"
    assert not list(root.rglob(".tmp-*"))
