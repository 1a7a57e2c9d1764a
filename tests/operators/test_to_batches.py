"""to_batches: rows from any Bytewax stream into keyed Arrow batches, bad rows to the DLQ."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.dataset as ds
import pydantic
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main
from hypothesis import given
from hypothesis import strategies as st

import thalweg_bytewax.operators as twg
from tests.helpers import run_flow
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes.dlq import DLQ_MESSAGE, DLQ_REASON, DLQ_ROW_JSON
from thalweg_bytewax.operators._batch_convert import RowConverter
from thalweg_bytewax.operators.batching import _Gather
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


@dataclass
class User:
    id: int
    name: str | None


class UserModel(pydantic.BaseModel):
    id: int
    name: str | None


def run(items: list[Any], entry_point: Any = run_main, **kwargs: Any) -> tuple[list, list]:
    got = run_flow(
        items,
        lambda up: twg.to_batches("batches", up, **{"schema": SCHEMA, **kwargs}),
        flow_id="tb",
        entry_point=entry_point,
    )
    return got["batches"], got["rejected"]


def rows_of(got: list) -> list[dict[str, Any]]:
    return [r for _, b in got for r in b.select(SCHEMA.names).to_pylist()]


def relative(offsets: list[int], base: int | None = None) -> list[int]:
    first = min(offsets, default=0) if base is None else base
    return [o - first for o in offsets]


def dlq_rows(rejected: list) -> list[dict[str, Any]]:
    return [r for _, b in rejected for r in b.to_pylist()]


def test_dicts_dataclasses_pydantic_models_and_tuples_become_one_batch(entry_point):
    items = [{"id": 1, "name": "a"}, User(2, "b"), UserModel(id=3, name=None), (4, "d")]
    got, rejected = run(items, entry_point, max_rows=10)
    assert rejected == []
    assert [k for k, _ in got] == ["tb.batches:0"]
    assert rows_of(got) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": None},
        {"id": 4, "name": "d"},
    ]
    assert got[0][1].schema == SCHEMA  # no locator unless asked for


def test_counter_locator_numbers_every_row_per_bucket():
    items = [{"id": i, "name": str(i)} for i in range(7)]
    started_ns = time.time_ns()
    got, _ = run(items, max_rows=3, locator="counter", topic="users")
    finished_ns = time.time_ns()
    assert [b.num_rows for _, b in got] == [3, 3, 1]
    batch = pa.Table.from_batches([b for _, b in got])
    offsets = batch.column(COLS.source_offset).to_pylist()
    assert relative(offsets) == list(range(7))
    # The counter starts at the wall clock (ns), so a fresh run never reuses offsets.
    assert started_ns <= offsets[0] <= finished_ns
    assert set(batch.column(COLS.source_topic).to_pylist()) == {"users"}
    assert set(batch.column(COLS.source_partition).to_pylist()) == {0}
    assert {k for k, _ in got} == {"users:0"}


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"id": "x", "name": "a"}, "does not fit the schema: Could not convert 'x'"),
        ({"id": 1.5, "name": "a"}, "field `id`: expected a value int64 holds without a loss"),
        ({"name": "a"}, "lacks field(s) `id`; expected every schema field"),
        ({"id": 1, "name": "a", "zz": 2}, "has field(s) `zz` the schema lacks"),
        ({"id": None, "name": "a"}, "field `id` is null; expected a value"),
        (5, "expected a dict, dataclass, pydantic model or tuple; got int"),
        ((1, "a", 3), "expected a tuple of 2 values (one per schema field); got 3"),
    ],
)
def test_a_bad_row_goes_to_rejected_and_its_batch_still_converts(row, fragment):
    items = [{"id": 0, "name": "before"}, row, {"id": 2, "name": "after"}]
    got, rejected = run(items, max_rows=10, locator="counter")
    assert rows_of(got) == [{"id": 0, "name": "before"}, {"id": 2, "name": "after"}]
    # The good rows keep the offsets they had in the gathering; the bad one has its own.
    offsets = pa.Table.from_batches([b for _, b in got]).column(COLS.source_offset).to_pylist()
    (dlq,) = dlq_rows(rejected)
    assert relative([*offsets, dlq[COLS.source_offset]]) == [0, 2, 1]
    assert dlq[DLQ_REASON] == "contract"
    where = f"`tb.batches:0@{dlq[COLS.source_offset]}`"
    assert dlq[DLQ_MESSAGE].startswith(f"to_batches `tb.batches`: row at {where}: ")
    assert fragment in dlq[DLQ_MESSAGE]
    assert dlq[COLS.record_id] is not None and len(dlq[COLS.record_id]) == 16
    assert dlq[COLS.source_value] == dlq[DLQ_ROW_JSON].encode()
    assert [k for k, _ in rejected] == ["tb.batches:0"]


def test_silent_truncations_of_pyarrow_are_refused():
    schema = pa.schema(
        [("n", pa.int32()), ("d", pa.date32()), ("t", pa.timestamp("s", tz="UTC"))]
    )
    noon = datetime(2026, 1, 1, 12, tzinfo=UTC)
    midnight = datetime(2026, 1, 1, tzinfo=UTC)
    conv = RowConverter(
        "s", schema, topic=None, columns=COLS, missing_fields="reject", extra_fields="reject"
    )
    rows = [
        {"n": 2.0, "d": date(2026, 1, 1), "t": midnight},  # lossless: kept
        {"n": 2.5, "d": date(2026, 1, 1), "t": midnight},
        {"n": 1, "d": noon, "t": midnight},
        {"n": 1, "d": date(2026, 1, 1), "t": midnight + timedelta(milliseconds=5)},
    ]
    out = conv.convert(rows, 0, 0)
    assert out.ok is not None and out.ok.to_pylist() == [
        {"n": 2, "d": date(2026, 1, 1), "t": midnight}
    ]
    assert out.rejected is not None
    messages = out.rejected.column(DLQ_MESSAGE).to_pylist()
    assert ["`n`" in messages[0], "`d`" in messages[1], "`t`" in messages[2]] == [True] * 3


def test_nested_non_nullable_field_null_is_rejected():
    schema = pa.schema(
        [("s", pa.struct([pa.field("x", pa.int64(), nullable=False), ("y", pa.string())]))]
    )
    conv = RowConverter(
        "s", schema, topic=None, columns=COLS, missing_fields="reject", extra_fields="reject"
    )
    out = conv.convert([{"s": {"x": 1, "y": "a"}}, {"s": {"y": "b"}}, {"s": None}], 0, 0)
    assert out.ok is not None and out.ok.to_pylist() == [{"s": {"x": 1, "y": "a"}}, {"s": None}]
    assert out.rejected is not None
    assert "field `s.x` is null" in out.rejected.column(DLQ_MESSAGE)[0].as_py()


def test_missing_nullable_fields_may_be_null_and_extra_fields_ignored():
    items = [{"id": 1}, {"id": 2, "name": "b", "zz": 1}, {"name": "c"}]
    got, rejected = run(items, missing_fields="null", extra_fields="ignore")
    assert rows_of(got) == [{"id": 1, "name": None}, {"id": 2, "name": "b"}]
    # A missing non-nullable field is still a null where a value is required.
    assert "field `id` is null" in dlq_rows(rejected)[0][DLQ_MESSAGE]


def test_many_bad_rows_are_found_and_order_is_kept():
    items: list[Any] = [
        {"id": i, "name": "x"} if i % 7 else {"id": f"bad{i}", "name": "x"} for i in range(100)
    ]
    got, rejected = run(items, max_rows=64, locator="counter")
    assert [r["id"] for r in rows_of(got)] == [i for i in range(100) if i % 7]
    good = [o for _, b in got for o in b.column(COLS.source_offset).to_pylist()]
    bad = sorted(r[COLS.source_offset] for r in dlq_rows(rejected))
    assert relative(bad, min(good + bad)) == list(range(0, 100, 7))


def test_keys_pick_buckets_and_each_key_stays_in_order(entry_point):
    items = [(f"k{i % 5}", {"id": i, "name": f"k{i % 5}"}) for i in range(60)]
    got, _ = run(items, entry_point, max_rows=4, partitions=3, keyed=True, locator="counter")
    by_key: dict[str, list[int]] = {}
    offsets: dict[str, list[int]] = {}
    for key, batch in got:
        assert key.startswith("tb.batches:")
        partition = int(key.rpartition(":")[2])
        assert set(batch.column(COLS.source_partition).to_pylist()) == {partition}
        offsets.setdefault(key, []).extend(batch.column(COLS.source_offset).to_pylist())
        for row in batch.to_pylist():
            by_key.setdefault(row["name"], []).append(row["id"])
            assert by_key[row["name"]][-1] % 5 == int(row["name"][1:])
    assert sum(map(len, by_key.values())) == 60
    for ids in by_key.values():
        assert ids == sorted(ids)
    for offs in offsets.values():
        assert relative(offs) == list(range(len(offs)))  # per bucket: no gap, in order
    assert len(offsets) > 1  # five keys over three buckets use more than one


def test_key_callable_on_a_plain_stream():
    items = [{"id": i, "name": f"k{i % 4}"} for i in range(20)]
    got, _ = run(items, key=lambda r: r["name"], partitions=2)
    assert sorted(r["id"] for r in rows_of(got)) == list(range(20))


def test_max_delay_emits_a_partial_batch():
    conv = RowConverter(
        "s", SCHEMA, topic=None, columns=COLS, missing_fields="reject", extra_fields="reject"
    )
    logic = _Gather(conv, 100, timedelta(seconds=2), None)
    before = datetime.now(UTC)
    out, _ = logic.on_batch([(0, {"id": 1, "name": "a"})])
    assert list(out) == []
    due = logic.notify_at()
    assert due is not None and before + timedelta(seconds=2) <= due
    (converted,) = logic.on_notify()[0]
    assert converted.ok is not None and converted.ok.num_rows == 1
    assert logic.notify_at() is None  # nothing buffered, nothing due


def _recovery_items(n: int, abort_at: int, *, bad: bool = False) -> list[Any]:
    rows: list[Any] = [
        {"id": f"bad{i}" if bad and i % 10 == 9 else i, "name": str(i)} for i in range(n)
    ]
    return [*rows[:abort_at], TestingSource.ABORT(), *rows[abort_at:]]


def test_counter_offsets_are_stable_across_a_resume(tmp_path):
    init_db_dir(tmp_path, 1)
    recovery = RecoveryConfig(str(tmp_path))
    flow = Dataflow("tb")
    up = op.input("in", flow, TestingSource(_recovery_items(20, 11)))
    out = twg.to_batches("batches", up, schema=SCHEMA, max_rows=3, locator="counter")
    got: list = []
    op.output("ok", out.batches, TestingSink(got))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # aborts
    first = len(got)
    assert 0 < first
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # resumes
    seen: dict[int, set[int]] = {}
    for _, batch in got:
        for row in batch.to_pylist():
            seen.setdefault(row["id"], set()).add(row[COLS.source_offset])
    assert set(seen) == set(range(20)), "a row was lost across the resume"
    assert all(len(offs) == 1 for offs in seen.values()), "a replayed row got a new offset"
    offsets = {i: offs.pop() for i, offs in seen.items()}
    base = offsets[0]
    assert {i: o - base for i, o in offsets.items()} == {i: i for i in range(20)}


def test_into_a_parquet_sink_every_row_lands_once_across_a_resume(tmp_path):
    lane = tmp_path / "lane"
    (tmp_path / "rec").mkdir()
    init_db_dir(tmp_path / "rec", 1)
    recovery = RecoveryConfig(str(tmp_path / "rec"))
    flow = Dataflow("tb")
    up = op.input("in", flow, TestingSource(_recovery_items(50, 23, bad=True)))
    out = twg.to_batches("batches", up, schema=SCHEMA, max_rows=4, locator="counter")
    op.output("lane", out.batches, ParquetSink(lane, shards=2))
    op.output("dlq", out.rejected, ParquetSink(tmp_path / "dlq", shards=2))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # aborts
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # resumes
    table = ds.dataset(str(lane)).to_table()
    ids = sorted(table.column("id").to_pylist())
    assert ids == [i for i in range(50) if i % 10 != 9], "expected each good row once"
    dlq = ds.dataset(str(tmp_path / "dlq")).to_table()
    assert sorted(dlq.column(DLQ_ROW_JSON).to_pylist()) == sorted(
        f'{{"id":"bad{i}","name":"{i}"}}' for i in range(9, 50, 10)
    ), "expected each bad row once in the DLQ lane"
    offsets = [*table.column(COLS.source_offset).to_pylist(), *dlq[COLS.source_offset].to_pylist()]
    assert relative(sorted(offsets)) == list(range(50))


def test_a_fresh_run_into_the_same_lane_is_not_taken_for_a_replay(tmp_path):
    for _ in range(2):  # no recovery: the second run is new data, not a replay
        flow = Dataflow("tb")
        rows: list[dict[str, Any]] = [{"id": i, "name": "x"} for i in range(5)]
        up = op.input("in", flow, TestingSource(rows))
        out = twg.to_batches("batches", up, schema=SCHEMA, locator="counter")
        op.output("lane", out.batches, ParquetSink(tmp_path / "lane"))
        run_main(flow)
    table = ds.dataset(str(tmp_path / "lane")).to_table()
    assert sorted(table.column("id").to_pylist()) == sorted([*range(5), *range(5)])


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"schema": "id int"}, "`schema` expected a `pyarrow.Schema` with fields"),
        ({"schema": pa.schema([])}, "`schema` expected a `pyarrow.Schema` with fields"),
        ({"max_rows": 0}, "`max_rows` expected an integer >= 1; got 0"),
        ({"partitions": True}, "`partitions` expected an integer >= 1; got True"),
        ({"max_delay": timedelta(0)}, "`max_delay` expected a positive `timedelta`"),
        ({"locator": "kafka"}, "`locator` expected 'counter' or None; got 'kafka'"),
        ({"missing_fields": "drop"}, "`missing_fields` expected 'reject' or 'null'"),
        ({"key": len, "keyed": True}, "a keyed stream is bucketed by its own key"),
        ({"topic": ""}, "`topic` expected a non-empty string"),
        (
            {"schema": pa.schema([("_twg_x", pa.int64())]), "locator": "counter"},
            "schema field(s) `_twg_x` fall under the metadata prefix `_twg_`",
        ),
    ],
)
def test_bad_options_fail_at_build_time(kwargs, fragment):
    flow = Dataflow("tb")
    empty: list[Any] = []
    up = op.input("in", flow, TestingSource(empty))
    with pytest.raises(ConfigError, match="^to_batches `tb.batches`: ") as info:
        twg.to_batches("batches", up, **{"schema": SCHEMA, **kwargs})
    assert fragment in str(info.value)


def test_the_guarantee_is_logged_once_at_build(caplog):
    with caplog.at_level(logging.INFO, logger="thalweg_bytewax.operators.batching"):
        run([{"id": 1, "name": "a"}], locator="counter")
    (record,) = [r for r in caplog.records if r.name.endswith("batching")]
    assert "exactly-once only if the upstream replays the same rows" in record.getMessage()


ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("ok", pa.bool_()),
        ("tags", pa.list_(pa.string())),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)
_rows = st.fixed_dictionaries(
    {
        "id": st.integers(-(2**63), 2**63 - 1),
        "name": st.none() | st.text(max_size=8),
        "score": st.none() | st.floats(allow_nan=False),
        "ok": st.none() | st.booleans(),
        "tags": st.none() | st.lists(st.text(max_size=3), max_size=3),
        "at": st.none()
        | st.datetimes(
            min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
        ),
    }
)


@given(rows=st.lists(_rows, max_size=40), max_rows=st.integers(1, 16))
def test_rows_that_match_the_schema_round_trip_exactly(rows, max_rows):
    flow = Dataflow("prop")
    up = op.input("in", flow, TestingSource(rows))
    out = twg.to_batches("b", up, schema=ROW_SCHEMA, max_rows=max_rows, locator="counter")
    got: list = []
    rejected: list = []
    op.output("ok", out.batches, TestingSink(got))
    op.output("rejected", out.rejected, TestingSink(rejected))
    run_main(flow)
    assert rejected == []
    assert all(0 < b.num_rows <= max_rows for _, b in got)
    back = [r for _, b in got for r in b.select(ROW_SCHEMA.names).to_pylist()]
    assert back == rows
    offsets = [o for _, b in got for o in b.column(COLS.source_offset).to_pylist()]
    assert relative(offsets) == list(range(len(rows)))


def test_a_rejected_rows_json_keeps_its_dates_and_times_exact():
    # orjson 3.13 alone writes time(1, 2, 3, 16000) as "01:02:03.16000".
    from datetime import time as clock

    bad = {"id": None, "name": "a", "at": clock(1, 2, 3, 16000), "on": date(2024, 5, 1)}
    _, rejected = run([bad], extra_fields="ignore")
    (row,) = dlq_rows(rejected)
    assert row[DLQ_ROW_JSON] == (
        '{"id":null,"name":"a","at":"01:02:03.016000","on":"2024-05-01"}'
    )
