"""window_agg in a dataflow: results equal a batch recomputation on one and two workers; late
records counted and sent to the side stream; event time clamped before it drives windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.operators import Session, Sliding, Tumbling, WindowAggOut
from thalweg_bytewax.windows.aggregate import WindowSpec

T0 = datetime(2024, 5, 1, tzinfo=UTC)
TS = pa.timestamp("ms", tz="UTC")


def orders(
    seconds: list[float], status: list[str], amount: list[int], **extra: Any
) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "created_at": pa.array([T0 + timedelta(seconds=s) for s in seconds], TS),
            "status": status,
            "amount": pa.array(amount, pa.int64()),
            **extra,
        }
    )


def run_windows(
    items: list[tuple[str, pa.RecordBatch]],
    window: WindowSpec,
    *,
    entry: Any = run_main,
    lateness: timedelta = timedelta(0),
    **kwargs: Any,
) -> tuple[list[tuple[str, pa.RecordBatch]], list[tuple[str, pa.RecordBatch]], WindowAggOut]:
    flow = Dataflow("windows")
    up = op.input("in", flow, TestingSource(items))
    out = twg.window_agg(
        "revenue",
        up,
        window=window,
        aggs={"revenue": ("sum", "amount"), "orders": ("count", "*")},
        group_by=["status"],
        time_column="created_at",
        allowed_lateness=lateness,
        **kwargs,
    )
    windows: list[tuple[str, pa.RecordBatch]] = []
    late: list[tuple[str, pa.RecordBatch]] = []
    op.output("windows", out.windows, TestingSink(windows))
    op.output("late", out.late, TestingSink(late))
    entry(flow)
    return windows, late, out


def upserted(windows: list[tuple[str, pa.RecordBatch]]) -> dict[tuple[Any, Any], dict[str, Any]]:
    """What a sink upserting on (group, window_start) holds."""
    view: dict[tuple[Any, Any], dict[str, Any]] = {}
    for _, b in windows:
        for row in b.to_pylist():
            view[(row["status"], row["window_start"])] = row
    return view


def recompute(batches: list[pa.RecordBatch], size_s: int) -> dict[tuple[Any, Any], tuple[int, int]]:
    """A batch GROUP BY of the whole data: (status, window start) -> (revenue, orders)."""
    table = pa.Table.from_batches(batches)
    out: dict[tuple[Any, Any], tuple[int, int]] = {}
    for row in table.to_pylist():
        t = row["created_at"]
        start = datetime.fromtimestamp(int(t.timestamp()) // size_s * size_s, UTC)
        revenue, n = out.get((row["status"], start), (0, 0))
        out[(row["status"], start)] = (revenue + row["amount"], n + 1)
    return out


def test_results_equal_a_batch_recomputation_on_every_entry_point(entry_point: Any) -> None:
    # Two source partitions, interleaved; lateness covers their skew, so nothing is late.
    items = []
    for i in range(20):
        for p in range(2):
            secs = [i * 7 + p + k * 0.5 for k in range(5)]
            status = ["NEW", "PAID", "NEW", "SHIPPED", "PAID"]
            items.append((f"orders:{p}", orders(secs, status, [i, p, k := 3, i * p, 1 + k])))
    windows, late, _ = run_windows(
        items, Tumbling(timedelta(seconds=30)), entry=entry_point, lateness=timedelta(minutes=5)
    )
    assert late == []
    view = upserted(windows)
    n_rows = sum(b.num_rows for _, b in windows)
    assert n_rows == len(view), "each (group, window) is emitted once in a run"
    got = {k: (v["revenue"], v["orders"]) for k, v in view.items()}
    assert got == recompute([b for _, b in items], 30)
    assert all(k == repr((v["status"],)) for k, b in windows for v in b.to_pylist())


def test_late_records_are_counted_and_sent_to_the_late_stream() -> None:
    items = [
        ("orders:0", orders([1, 2, 35], ["NEW", "NEW", "NEW"], [1, 2, 3])),  # closes [0, 30)
        ("orders:0", orders([5, 6, 40], ["NEW", "NEW", "NEW"], [10, 20, 4])),  # 5 and 6 late
    ]
    windows, late, out = run_windows(items, Tumbling(timedelta(seconds=30)))
    assert out.stats.late_records == 2
    rows = [r for _, b in late for r in b.to_pylist()]
    assert [(r["status"], r["late_records"]) for r in rows] == [("NEW", 2)]
    assert rows[0]["event_time_min"] == T0 + timedelta(seconds=5)
    assert rows[0]["watermark"] == T0 + timedelta(seconds=35)
    view = upserted(windows)
    assert view[("NEW", T0)]["revenue"] == 3  # the late 10 + 20 are not in it
    assert view[("NEW", T0 + timedelta(seconds=30))]["revenue"] == 7


def test_sliding_and_session_windows_in_a_flow() -> None:
    items = [
        ("orders:0", orders([0, 4], ["NEW", "NEW"], [1, 2])),
        ("orders:0", orders([20, 2], ["NEW", "NEW"], [4, 8])),
    ]
    windows, _, _ = run_windows(items, Session(timedelta(seconds=5)), lateness=timedelta(minutes=1))
    view = upserted(windows)
    assert {k[1]: v["revenue"] for k, v in view.items()} == {
        T0: 11,
        T0 + timedelta(seconds=20): 4,
    }
    windows, _, _ = run_windows(
        items,
        Sliding(timedelta(seconds=10), timedelta(seconds=5)),
        lateness=timedelta(minutes=1),
    )
    view = upserted(windows)
    assert {k[1]: v["orders"] for k, v in view.items()} == {
        T0 - timedelta(seconds=5): 3,
        T0: 3,
        T0 + timedelta(seconds=15): 1,
        T0 + timedelta(seconds=20): 1,
    }


def test_a_future_dated_record_is_clamped_and_does_not_make_honest_records_late() -> None:
    ingest = pa.array([T0 + timedelta(seconds=s) for s in (1, 2)], pa.timestamp("us", tz="UTC"))
    forged = orders([1, 365 * 86400], ["NEW", "NEW"], [1, 1], _twg_ingest_ts=ingest)
    honest = orders(
        [10, 20],
        ["NEW", "NEW"],
        [1, 1],
        _twg_ingest_ts=pa.array([T0 + timedelta(seconds=s) for s in (10, 20)], ingest.type),
    )
    windows, late, out = run_windows(
        [("orders:0", forged), ("orders:0", honest)],
        Tumbling(timedelta(seconds=30)),
        lateness=timedelta(minutes=2),
    )
    # The year-ahead record counts at ingest time + 1 min (T0 + 62 s), so the watermark
    # stays within the allowed lateness of honest time: the records of 10 s and 20 s
    # still join [0, 30). Unclamped, it would have closed every window for a year.
    assert out.stats.clamped == 1
    assert late == []
    view = upserted(windows)
    assert view[("NEW", T0)]["orders"] == 3
    assert view[("NEW", T0 + timedelta(seconds=60))]["orders"] == 1


def config_error_in(exc: BaseException) -> ConfigError:
    """The ConfigError a dataflow run raised (Bytewax wraps it in its step error)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ConfigError):
        cause = cause.__cause__
    assert isinstance(cause, ConfigError), exc
    return cause


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (
            pa.record_batch({"status": ["NEW"], "amount": [1]}),
            "window_agg `windows.revenue`: expected the event-time column `created_at` in the "
            "batch; got ['status', 'amount']. Set `time_column`",
        ),
        (
            pa.record_batch({"created_at": [1], "status": ["NEW"], "amount": [1]}),
            "window_agg `windows.revenue`: expected `created_at` to be a timestamp; got int64",
        ),
    ],
)
def test_a_batch_without_a_usable_time_column_is_a_config_error(
    bad: pa.RecordBatch, match: str
) -> None:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the ConfigError is its cause
        run_windows([("orders:0", bad)], Tumbling(timedelta(seconds=30)))
    assert str(config_error_in(info.value)).startswith(match)


def test_count_distinct_is_refused_at_build_time() -> None:
    flow = Dataflow("bad")
    nothing: list[tuple[str, pa.RecordBatch]] = []
    up = op.input("in", flow, TestingSource(nothing))
    with pytest.raises(ConfigError, match="count distinct downstream"):
        twg.window_agg(
            "w",
            up,
            window=Tumbling(timedelta(seconds=1)),
            aggs={"d": ("count_distinct", "amount")},
            time_column="created_at",
        )


def test_empty_batches_and_all_null_times() -> None:
    empty = orders([], [], [])
    untimed = pa.record_batch(
        {
            "created_at": pa.nulls(2, TS),
            "status": ["NEW", "NEW"],
            "amount": pa.array([1, 2], pa.int64()),
        }
    )
    windows, late, out = run_windows(
        [("orders:0", empty), ("orders:0", untimed)], Tumbling(timedelta(seconds=30))
    )
    assert windows == []
    assert out.stats.late_records == 2
    assert pc.sum(late[0][1].column("late_records")).as_py() == 2
