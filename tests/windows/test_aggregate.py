"""Window partials merge exactly: any split of the data into batches, in any order, folds to
the aggregation of the whole; lateness, sessions bridging, snapshots and refusals."""

from __future__ import annotations

import pickle
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.windows.aggregate import (
    SOURCE,
    Session,
    Sliding,
    Tumbling,
    WindowPlan,
    WindowSpec,
    pre_aggregate,
    split_by_key,
)
from thalweg_bytewax.windows.fold import WindowFolder

S = 1_000_000  # µs per second
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AGGS = {
    "n": ("count", "*"),
    "nx": ("count", "x"),
    "total": ("sum", "x"),
    "lo": ("min", "x"),
    "hi": ("max", "x"),
    "mean": ("avg", "x"),
}

Row = tuple[str | None, int | None, int | None]  # group, time (µs), x


def batch_of(rows: list[Row]) -> tuple[pa.RecordBatch, pa.Array]:
    batch = pa.record_batch(
        {
            "g": pa.array([r[0] for r in rows], pa.string()),
            "x": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    return batch, pa.array([r[1] for r in rows], pa.int64())


def fold_all(plan: WindowPlan, batches: list[list[Row]]) -> tuple[set[tuple[Any, ...]], int]:
    """Fold batches in order through one folder per group key; flush; (results, late records)."""
    folders: dict[str, WindowFolder] = {}
    results: list[pa.RecordBatch] = []
    late = 0
    for rows in batches:
        if not rows:
            continue
        batch, times = batch_of(rows)
        for key, part in split_by_key(pre_aggregate(batch, times, plan), plan.group_by):
            closed, lost = folders.setdefault(key, WindowFolder(plan)).fold(part)
            results += [closed] if closed is not None else []
            if lost is not None:
                late += sum(lost.column("late_records").to_pylist())
    for folder in folders.values():
        flushed = folder.flush()
        results += [flushed] if flushed is not None else []
    got: list[tuple[Any, ...]] = []
    for b in results:
        got += [tuple(r.values()) for r in b.to_pylist()]
    assert len(got) == len(set(got)), "a window was emitted twice"
    return set(got), late


def ts(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def reference(window: WindowSpec, rows: list[Row]) -> set[tuple[Any, ...]]:
    """Aggregate the whole data row by row, the obvious way."""
    members: dict[tuple[Any, int, int], list[int | None]] = defaultdict(list)
    by_group: dict[Any, list[tuple[int, int | None]]] = defaultdict(list)
    for g, t, x in rows:
        assert t is not None
        if isinstance(window, Session):
            by_group[g].append((t, x))
            continue
        length, step = (
            (window.size, window.size)
            if isinstance(window, Tumbling)
            else (window.length, window.step)
        )
        ln, sp = length // timedelta(microseconds=1), step // timedelta(microseconds=1)
        s = (t // sp) * sp
        while s > t - ln:
            members[(g, s, s + ln)].append(x)
            s -= sp
    if isinstance(window, Session):
        gap = window.gap // timedelta(microseconds=1)
        for g, items in by_group.items():
            items.sort(key=lambda i: i[0])
            start, last, xs = items[0][0], items[0][0], [items[0][1]]
            for t, x in items[1:]:
                if t - last >= gap:
                    members[(g, start, last + gap)] = xs
                    start, xs = t, []
                last = t
                xs.append(x)
            members[(g, start, last + gap)] = xs
    out = set()
    for (g, s, e), xs in members.items():
        vals = [x for x in xs if x is not None]
        out.add(
            (
                g,
                ts(s),
                ts(e),
                len(xs),
                len(vals),
                sum(vals) if vals else None,
                min(vals) if vals else None,
                max(vals) if vals else None,
                sum(vals) / len(vals) if vals else None,
            )
        )
    return out


WINDOWS = st.sampled_from(
    [
        Tumbling(timedelta(seconds=10)),
        Sliding(timedelta(seconds=10), timedelta(seconds=4)),
        Sliding(timedelta(seconds=6), timedelta(seconds=6)),
        Session(timedelta(seconds=3)),
    ]
)
ROWS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.integers(-20 * S, 60 * S),
        st.one_of(st.none(), st.integers(-1000, 1000)),
    ),
    min_size=1,
    max_size=60,
)


@given(window=WINDOWS, rows=ROWS, cuts=st.lists(st.integers(0, 60), max_size=8), data=st.data())
def test_any_split_in_any_order_folds_to_the_whole(
    window: WindowSpec, rows: list[Row], cuts: list[int], data: st.DataObject
) -> None:
    # Lateness covers the whole time range, so nothing closes before the end.
    plan = WindowPlan(window, AGGS, ["g"], allowed_lateness=timedelta(seconds=100))
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    batches = [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    batches = data.draw(st.permutations(batches))
    got, late = fold_all(plan, batches)
    assert late == 0
    assert got == reference(window, rows)


@given(window=WINDOWS, rows=ROWS, cut=st.integers(1, 59))
def test_a_snapshot_taken_midway_resumes_to_the_same_results(
    window: WindowSpec, rows: list[Row], cut: int
) -> None:
    plan = WindowPlan(window, AGGS, ["g"], allowed_lateness=timedelta(seconds=5))
    first, second = rows[:cut], rows[cut:]
    whole, _ = fold_all(plan, [first, second])
    folders: dict[str, WindowFolder] = {}
    emitted: list[pa.RecordBatch] = []
    for rows_ in (first,):
        batch, times = batch_of(rows_)
        for key, part in split_by_key(pre_aggregate(batch, times, plan), ["g"]):
            closed, _ = folders.setdefault(key, WindowFolder(plan)).fold(part)
            emitted += [closed] if closed is not None else []
    restored = {
        k: WindowFolder(plan, pickle.loads(pickle.dumps(f.snapshot()))) for k, f in folders.items()
    }
    if second:
        batch, times = batch_of(second)
        for key, part in split_by_key(pre_aggregate(batch, times, plan), ["g"]):
            closed, _ = restored.setdefault(key, WindowFolder(plan)).fold(part)
            emitted += [closed] if closed is not None else []
    for f in restored.values():
        flushed = f.flush()
        emitted += [flushed] if flushed is not None else []
    got = {tuple(r.values()) for b in emitted for r in b.to_pylist()}
    assert got == whole


def test_late_records_are_counted_with_the_watermark_they_missed() -> None:
    plan = WindowPlan(Tumbling(timedelta(seconds=10)), {"n": ("count", "*")}, ["g"])
    got, late = fold_all(
        plan,
        [
            [("a", 1 * S, 1), ("a", 12 * S, 1)],  # watermark 12 s closes [0, 10)
            [("a", 3 * S, 1), ("a", 4 * S, 1), ("a", 13 * S, 1)],  # two late, one on time
            [("a", None, 1)],  # no event time: late
        ],
    )
    assert late == 3
    assert got == {("a", ts(0), ts(10 * S), 1), ("a", ts(10 * S), ts(20 * S), 2)}


def test_allowed_lateness_keeps_a_window_open() -> None:
    plan = WindowPlan(
        Tumbling(timedelta(seconds=10)), {"n": ("count", "*")}, [], timedelta(seconds=5)
    )
    got, late = fold_all(plan, [[(None, 1 * S, 1), (None, 12 * S, 1)], [(None, 3 * S, 1)]])
    assert late == 0
    assert (ts(0), ts(10 * S), 2) in got


def test_sliding_late_partials_still_count_in_the_windows_still_open() -> None:
    plan = WindowPlan(
        Sliding(timedelta(seconds=10), timedelta(seconds=5)), {"n": ("count", "*")}, []
    )
    got, late = fold_all(plan, [[(None, 1 * S, 1), (None, 10 * S, 1)], [(None, 6 * S, 1)]])
    # 6 s belongs to [0, 10) (closed at watermark 10) and [5, 15) (open).
    assert late == 1
    assert (ts(5 * S), ts(15 * S), 2) in got
    assert (ts(0), ts(10 * S), 1) in got


def test_a_record_arriving_later_bridges_two_sessions() -> None:
    plan = WindowPlan(
        Session(timedelta(seconds=5)), {"n": ("count", "*")}, ["g"], timedelta(seconds=30)
    )
    got, late = fold_all(plan, [[("a", 0, 1)], [("a", 8 * S, 1)], [("a", 4 * S, 1)]])
    assert late == 0
    assert got == {("a", ts(0), ts(13 * S), 3)}


def test_a_record_touching_a_closed_session_is_late_not_a_new_session() -> None:
    plan = WindowPlan(Session(timedelta(seconds=5)), {"n": ("count", "*")}, [])
    got, late = fold_all(plan, [[(None, 0, 1)], [(None, 20 * S, 1)], [(None, 3 * S, 1)]])
    assert late == 1
    assert got == {(ts(0), ts(5 * S), 1), (ts(20 * S), ts(25 * S), 1)}


@pytest.mark.parametrize(
    ("window", "aggs", "match"),
    [
        (Tumbling(timedelta(0)), {"n": ("count", "*")}, "expected `size` to be a positive"),
        (
            Sliding(timedelta(seconds=5), timedelta(seconds=6)),
            {"n": ("count", "*")},
            "expected `step` <= `length`",
        ),
        (Tumbling(timedelta(seconds=1)), {"d": ("count_distinct", "x")}, "refused"),
        (Tumbling(timedelta(seconds=1)), {"m": ("median", "x")}, "expected a function in"),
        (Tumbling(timedelta(seconds=1)), {"s": ("sum", "*")}, "expected a column for 'sum'"),
        (Tumbling(timedelta(seconds=1)), {}, "at least one aggregate"),
        (Tumbling(timedelta(seconds=1)), {"g": ("count", "*")}, "apart from the group columns"),
    ],
)
def test_bad_plans_are_config_errors(
    window: WindowSpec, aggs: dict[str, tuple[str, str]], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        WindowPlan(window, aggs, ["g"])


def test_a_missing_column_names_it() -> None:
    plan = WindowPlan(Tumbling(timedelta(seconds=1)), {"s": ("sum", "amount")}, ["g"])
    batch, times = batch_of([("a", 0, 1)])
    with pytest.raises(ConfigError, match=r"expected column\(s\) \['amount'\]"):
        pre_aggregate(batch, times, plan)


def test_negative_lateness_is_refused() -> None:
    with pytest.raises(ConfigError, match="allowed_lateness"):
        WindowPlan(Tumbling(timedelta(seconds=1)), {"n": ("count", "*")}, [], timedelta(-1))


def late_rows_of(
    folder: WindowFolder, plan: WindowPlan, rows: list[Row], source: str
) -> list[dict[str, Any]]:
    """The late rows one batch of ``source`` gives ``folder`` (its partials carry the source)."""
    batch, times = batch_of(rows)
    partials = pre_aggregate(batch, times, plan)
    partials = partials.append_column(SOURCE, pa.array([source] * partials.num_rows))
    (key_part,) = split_by_key(partials, plan.group_by)
    _, late = folder.fold(key_part[1])
    return [] if late is None else late.to_pylist()


def test_late_rows_are_numbered_per_source_and_renumbered_alike_after_a_resume() -> None:
    plan = WindowPlan(Tumbling(timedelta(seconds=10)), {"n": ("count", "*")}, ["g"])
    folder = WindowFolder(plan)
    late_rows_of(folder, plan, [("a", 25 * S, 1)], "t:0")  # watermark 25 s
    first = late_rows_of(folder, plan, [("a", 1 * S, 1), ("a", 12 * S, 1)], "t:0")
    other = late_rows_of(folder, plan, [("a", 2 * S, 1)], "t:1")
    assert [(r["source"], r["late_seq"]) for r in first + other] == [
        ("t:0", 0),
        ("t:0", 1),
        ("t:1", 0),
    ]
    # Snapshot, go on, then resume from the snapshot and replay the same batch: the same
    # late row under the same key, so an upsert on (g, source, late_seq) holds it once.
    state = pickle.loads(pickle.dumps(folder.snapshot()))
    went_on = late_rows_of(folder, plan, [("a", 3 * S, 1)], "t:0")
    replayed = late_rows_of(WindowFolder(plan, state), plan, [("a", 3 * S, 1)], "t:0")
    assert went_on == replayed
    assert [(r["g"], r["source"], r["late_seq"]) for r in replayed] == [("a", "t:0", 2)]
    # A snapshot of the version before the numbering (six fields) still resumes.
    older = WindowFolder(plan, state[:6])
    assert [r["late_seq"] for r in late_rows_of(older, plan, [("a", 3 * S, 1)], "t:0")] == [0]
