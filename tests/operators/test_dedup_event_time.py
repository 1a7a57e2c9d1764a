"""dedup(): event time is producer-controlled, so it is clamped before it drives the window.

A record's event time counts at most ``ingest time + allowed_skew``; times older than
the window's clock never move it. These tests feed simulated streams (event time and
ingest time advance together, as on a live topic) with hostile timestamps mixed in and
check the two things a poisoned clock breaks: memory stays bounded by the keys of the
window, and a duplicate within the window is still dropped.
"""

from __future__ import annotations

import logging
import pickle
import sqlite3
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.operators as twg
from tests.fixtures.flows import EntryPoint
from tests.helpers import run_flow
from thalweg_bytewax.operators.deduplication import _DedupLogic
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()
MINUTE = timedelta(minutes=1)
T0_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
YEAR_2100_MS = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp() * 1000)
INT64_MAX = 2**63 - 1
# Hostile event times: far future, the int64 extremes, the epoch, before it, a day late.
HOSTILE_MS = [YEAR_2100_MS, INT64_MAX, -(2**63), 0, -1, -86_400_000 * 365 * 100, -86_400_000]


def stamped(keys: list[str], event_ms: list[int], ingest_ms: int) -> pa.RecordBatch:
    """A batch keyed by record id with event times (ms) and one ingest time."""
    return pa.RecordBatch.from_pydict(
        {
            COLS.record_id: pa.array(keys, pa.string()),
            COLS.source_timestamp: pa.array(event_ms, pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")
            ),
            COLS.ingest_ts: pa.array([ingest_ms * 1000] * len(keys), pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
        }
    )


def logic(window: timedelta = MINUTE, **kwargs: object) -> _DedupLogic:
    return _DedupLogic((COLS.record_id,), window, COLS.source_timestamp, None, **kwargs)  # type: ignore[arg-type]


def kept(out: pa.RecordBatch | None) -> list[str]:
    return [] if out is None else out.column(COLS.record_id).to_pylist()


def held(dedup: _DedupLogic) -> int:
    """Keys in the operator's snapshot: what recovery stores and memory holds."""
    _, buckets = dedup.snapshot()
    return sum(len(keys) for _, keys in buckets)


def live_stream(dedup: _DedupLogic, minutes: int, per_minute: int, poison_at: dict[int, int]):
    """Feed ``minutes`` of ``per_minute`` fresh keys, a batch every 15 s; yield keys held.

    ``poison_at`` maps a batch number to the event time (ms) of one extra record in it.
    """
    per_batch = per_minute // 4
    for b in range(minutes * 4):
        now = T0_MS + b * 15_000
        keys = [f"k{b}-{i}" for i in range(per_batch)]
        times = [now - 10 * i for i in range(per_batch)]
        if b in poison_at:
            keys.append(f"poison{b}")
            times.append(poison_at[b])
        dedup.filter(stamped(keys, times, now))
        yield held(dedup)


def test_one_far_future_record_does_not_pin_the_window():
    # 60 simulated minutes of 100 keys a minute, a one-minute window, one record in 2100.
    clean = max(live_stream(logic(), 60, 100, {}))
    poisoned = list(live_stream(logic(), 60, 100, {40: YEAR_2100_MS}))
    assert clean <= 2 * 100 + 25
    # Memory stays about two windows' worth (window + allowed skew) for the whole hour,
    # instead of growing by every key read after the poisoned record.
    assert max(poisoned) <= 2 * 100 + 25 + 1, max(poisoned)
    assert poisoned[-1] <= clean + 1


def test_a_duplicate_after_the_poisoned_record_is_still_dropped():
    dedup = logic()
    assert kept(dedup.filter(stamped(["a", "b"], [T0_MS, T0_MS], T0_MS))) == ["a", "b"]
    assert kept(dedup.filter(stamped(["x"], [YEAR_2100_MS], T0_MS + 5_000))) == ["x"]
    # 40 s later (within the one-minute window) the producer retries "a": dropped.
    assert kept(dedup.filter(stamped(["a", "c"], [T0_MS + 40_000] * 2, T0_MS + 40_000))) == ["c"]
    # And the poisoned record's own redelivery is dropped too.
    assert kept(dedup.filter(stamped(["x"], [YEAR_2100_MS], T0_MS + 45_000))) == []
    # Two minutes of honest time later "a" has left the window: new again.
    later = T0_MS + 200_000
    assert kept(dedup.filter(stamped(["a"], [later], later))) == ["a"]


def test_far_past_times_neither_evict_live_keys_nor_stay_forever():
    dedup = logic()
    dedup.filter(stamped(["live"], [T0_MS], T0_MS))
    past = [0, -1, -(2**63), -86_400_000 * 365 * 100]
    out = dedup.filter(stamped([f"old{i}" for i in range(4)], past, T0_MS + 1_000))
    assert kept(out) == ["old0", "old1", "old2", "old3"]
    # The live key is still remembered, and so are the old ones, as seen now.
    assert kept(dedup.filter(stamped(["live", "old2"], [T0_MS + 2_000] * 2, T0_MS + 2_000))) == []
    # Once the clock has moved a window (plus the skew) on, the old keys are gone.
    for b in range(1, 12):
        now = T0_MS + b * 15_000
        dedup.filter(stamped([f"n{b}"], [now], now))
    assert held(dedup) <= 12
    assert kept(dedup.filter(stamped(["old2"], [0], T0_MS + 180_000))) == ["old2"]


def test_out_of_range_timestamps_do_not_crash_the_batch():
    # A timestamp that overflows another unit must not raise: the batch would replay
    # after the restart and crash-loop.
    dedup = logic()
    out = dedup.filter(stamped(["a", "b"], [INT64_MAX, -(2**63)], T0_MS))
    assert kept(out) == ["a", "b"]
    ns = pa.RecordBatch.from_pydict(
        {
            COLS.record_id: pa.array(["c"]),
            COLS.source_timestamp: pa.array([INT64_MAX], pa.int64()).cast(pa.timestamp("s")),
        }
    )
    assert kept(dedup.filter(ns)) == ["c"]


def test_clamped_records_are_counted_and_logged_once_per_change(caplog):
    dedup = logic(step_id="dedup_orders")
    with caplog.at_level(logging.INFO, logger="thalweg_bytewax.windows.event_time"):
        for b in range(3):
            now = T0_MS + b * 1_000
            dedup.filter(
                stamped([f"f{b}", f"g{b}", f"h{b}"], [YEAR_2100_MS, now + 90_000, now], now)
            )
        dedup.filter(stamped(["honest"], [T0_MS + 9_000], T0_MS + 9_000))
        dedup.filter(stamped(["again"], [YEAR_2100_MS], T0_MS + 10_000))
    # 2100 and 90 s ahead (beyond the default one-minute skew) are both clamped.
    assert dedup.clamped == 7
    records = [r for r in caplog.records if "dedup_orders" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING, logging.INFO, logging.WARNING]
    assert "ahead of ingest time" in records[0].getMessage()


def test_allowed_skew_is_an_option():
    # A producer clock 10 minutes ahead is tolerated when the option says so.
    dedup = logic(allowed_skew=timedelta(minutes=15))
    dedup.filter(stamped(["a"], [T0_MS + 600_000], T0_MS))
    assert dedup.clamped == 0
    strict = logic(allowed_skew=timedelta(0))
    strict.filter(stamped(["a"], [T0_MS + 1], T0_MS))
    assert strict.clamped == 1


def test_a_negative_allowed_skew_is_refused_at_build():
    with pytest.raises(ValueError, match="allowed_skew"):
        twg.dedup(
            "dedup",
            op.input("inp", Dataflow("skew"), TestingSource([])),
            window=MINUTE,
            allowed_skew=timedelta(seconds=-1),
        )


def test_poisoned_stream_in_a_flow(entry_point: EntryPoint):
    items = []
    for p in range(2):
        key = f"orders:{p}"
        items += [
            (key, stamped([f"a{p}", f"b{p}"], [T0_MS] * 2, T0_MS)),
            (key, stamped([f"x{p}"], [YEAR_2100_MS], T0_MS + 1_000)),
            (key, stamped([f"a{p}", f"c{p}"], [T0_MS + 30_000] * 2, T0_MS + 30_000)),
        ]
    got = run_flow(
        items,
        lambda up: twg.dedup("dedup", up, window=MINUTE),
        flow_id="dedup_poison",
        entry_point=entry_point,
    )["out"]
    ids = sorted(r for _, b in got for r in b.column(COLS.record_id).to_pylist())
    assert ids == sorted(f"{k}{p}" for p in range(2) for k in "abxc")


# A stream of batches, one every `step` seconds of honest time (event time = ingest
# time); each batch has up to PER_BATCH rows: fresh honest keys, duplicates of keys
# first seen up to a window earlier, and records with hostile event times.
PER_BATCH = 6
STEP_S = 7


@st.composite
def adversarial_streams(draw: st.DrawFn) -> list[list[tuple[str, int]]]:
    hostile = st.one_of(
        st.sampled_from(HOSTILE_MS),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 10 * 365 * 86_400_000).map(lambda d: d + T0_MS),  # up to 10 years ahead
    )
    batches: list[list[tuple[str, int]]] = []
    for b in range(draw(st.integers(5, 60))):
        now = T0_MS + b * STEP_S * 1000
        rows: list[tuple[str, int]] = [(f"k{b}", now)]  # every batch has an honest row
        for i in range(draw(st.integers(0, PER_BATCH - 1))):
            kind = draw(st.sampled_from(["fresh", "dup", "hostile"]))
            if kind == "fresh":
                rows.append((f"k{b}-{i}", now - draw(st.integers(0, 5000))))
            elif kind == "dup" and b:
                back = draw(st.integers(0, min(b, 60 // STEP_S)))  # within the window
                rows.append((f"k{b - back}", now))
            else:
                rows.append((f"h{b}-{i}", draw(hostile)))
        batches.append(rows)
    return batches


@given(stream=adversarial_streams(), skew_s=st.sampled_from([0, 5, 60]))
def test_keys_held_stay_bounded_and_honest_duplicates_drop(stream, skew_s):
    window = MINUTE
    skew = timedelta(seconds=skew_s)
    dedup = logic(window, allowed_skew=skew)
    width = window.total_seconds() / 16
    # A key stays while the clock is < window + skew + one bucket past the time it was
    # first seen; the clock is at most skew ahead of honest time and never behind it.
    span = window.total_seconds() + 2 * skew_s + 2 * width
    bound = PER_BATCH * (int(span // STEP_S) + 1)
    seen_at: dict[str, int] = {}
    for b, rows in enumerate(stream):
        now = T0_MS + b * STEP_S * 1000
        out = set(kept(dedup.filter(stamped([k for k, _ in rows], [t for _, t in rows], now))))
        assert held(dedup) <= bound
        for key, _ in rows:
            if key.startswith("k") and key in seen_at and now - seen_at[key] <= 60_000:
                assert key not in out, f"duplicate {key} passed within the window"
        for key, _ in rows:
            if key in out:
                seen_at.setdefault(key, now)


def test_recovery_snapshots_stay_bounded_and_resume_drops_the_duplicate(tmp_path):
    # 20 simulated minutes of 100 keys a minute with a 2100 record at minute 5, a crash,
    # then a retry of a key read just before it: dropped from the restored state.
    items: list = []
    for b in range(4 * 20):
        now = T0_MS + b * 15_000
        keys = [f"k{b}-{i}" for i in range(25)]
        times = [now] * 25
        if b == 20:
            keys.append("poison")
            times.append(YEAR_2100_MS)
        items.append(("orders:0", stamped(keys, times, now)))
    last = T0_MS + 80 * 15_000
    items += [TestingSource.ABORT(), ("orders:0", stamped(["k79-0", "new"], [last] * 2, last))]
    init_db_dir(tmp_path, 1)
    got: list = []
    recovery = RecoveryConfig(str(tmp_path))
    for _ in ("aborts", "resumes"):
        run_flow(
            items,
            lambda up: twg.dedup("dedup", up, window=MINUTE),
            flow_id="dedup_snap",
            into={"out": got},
            epoch_interval=timedelta(0),
            recovery_config=recovery,
        )
    ids = [r for _, b in got for r in b.column(COLS.record_id).to_pylist()]
    assert ids.count("k79-0") == 1
    assert "new" in ids
    sizes = []
    with sqlite3.connect(tmp_path / "part-0.sqlite3") as db:
        step = "dedup_snap.dedup.dedup.stateful_batch"
        rows = db.execute("SELECT ser_change FROM snaps WHERE step_id = ?", (step,))
        for (blob,) in rows:
            if blob is not None:
                _, buckets = pickle.loads(blob)  # noqa: S301 - our own recovery store
                sizes.append(sum(len(keys) for _, keys in buckets))
    assert sizes  # the store keeps the step's latest snapshot
    assert max(sizes) <= 2 * 100 + 25 + 1, max(sizes)
