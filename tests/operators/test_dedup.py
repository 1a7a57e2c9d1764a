"""dedup(): by record id and by natural key, window bounds, and resume after a crash."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from tests.contracts.orders_data import COLS, orders, orders_batch, orders_contract
from tests.fixtures.flows import EntryPoint
from tests.helpers import run_flow
from thalweg_bytewax.contracts import parse_contract
from thalweg_bytewax.errors import ConfigError

CONTRACT = orders_contract()
HOUR = timedelta(hours=1)


def run(batches, *, entry_point: EntryPoint = run_main, recovery=None, epoch=None, **kwargs):
    got = run_flow(
        batches,
        lambda up: twg.dedup("dedup", up, window=HOUR, **kwargs),
        flow_id="dedup_test",
        entry_point=entry_point,
        epoch_interval=epoch,
        recovery_config=recovery,
    )
    return got["out"]


def ids(items):
    return [rid for _, b in items for rid in b.column(COLS.record_id).to_pylist()]


def test_same_record_id_is_emitted_once(entry_point):
    # Three partitions, so that with two workers the keyed state splits between them.
    items, expected = [], []
    for p in range(3):
        batch = orders_batch(orders(10, seed=p), partition=p)
        redelivered = batch.slice(4, 3)  # the broker delivers offsets 4..6 again
        in_batch_dup = pa.concat_batches([batch.slice(0, 2), batch.slice(0, 2)])
        key = f"orders:{p}"
        items += [(key, batch), (key, redelivered), (key, in_batch_dup)]
        expected += batch.column(COLS.record_id).to_pylist()
    got = run(items, entry_point=entry_point)
    assert sorted(ids(got)) == sorted(expected)
    assert {k for k, _ in got} == {"orders:0", "orders:1", "orders:2"}


def test_same_natural_key_at_a_new_offset_is_emitted_once(entry_point):
    rows = orders(10)
    retried = copy.deepcopy(rows[:3])  # a producer retry: same orders, new offsets
    batches = [
        ("orders:0", orders_batch(rows)),
        ("orders:0", orders_batch(retried, first_offset=10)),
    ]
    got = run(batches, by="natural_key", contract=CONTRACT, entry_point=entry_point)
    offsets = [o for _, b in got for o in b.column(COLS.source_offset).to_pylist()]
    assert sorted(offsets) == list(range(10))
    # By record id alone the retry is new data (different offsets, different ids).
    assert len(ids(run(batches, entry_point=entry_point))) == 13


def test_content_dedup_without_a_declared_natural_key_is_refused_at_build():
    with pytest.raises(ConfigError, match="natural key"):
        run([], by="natural_key")
    keyless = parse_contract(
        "apiVersion: v3.0.2\nkind: DataContract\nid: x\nschema:\n  - name: t\n"
        "    properties:\n      - name: a\n        logicalType: string\n"
    )
    with pytest.raises(ConfigError, match="without one"):
        run([], by=["a"], contract=keyless)
    with pytest.raises(ConfigError, match="natural key"):
        run([], by=["customer_id"], contract=CONTRACT)


def test_event_time_window_in_a_flow(entry_point):
    rows = orders(4)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def stamped(batch, when):
        ts = pa.array([when] * batch.num_rows, pa.timestamp("ms", tz="UTC"))
        return batch.append_column(pa.field(COLS.source_timestamp, ts.type), ts)

    batch = orders_batch(rows)
    got = run(
        [
            ("orders:0", stamped(batch, t0)),
            ("orders:0", stamped(batch, t0 + timedelta(minutes=30))),  # within the window
            ("orders:0", stamped(batch.slice(0, 1), t0 + timedelta(hours=3))),  # forgotten
        ],
        entry_point=entry_point,
    )
    assert len(ids(got)) == 5


def test_resume_after_abort_loses_nothing_and_passes_no_duplicate(tmp_path):
    rows = orders(30)
    batches = [orders_batch(rows[i : i + 5], first_offset=i) for i in range(0, 30, 5)]
    # Offsets 0..14, then a crash, then the broker redelivers 5..14 plus the rest.
    items: list[tuple[str, pa.RecordBatch] | TestingSource.EOF | TestingSource.ABORT] = [
        ("orders:0", batches[0]),
        ("orders:0", batches[1]),
        ("orders:0", batches[2]),
        TestingSource.EOF(),
        ("orders:0", batches[1]),
        TestingSource.ABORT(),
        ("orders:0", batches[2]),
        ("orders:0", batches[3]),
        ("orders:0", batches[4]),
        ("orders:0", batches[5]),
    ]
    init_db_dir(tmp_path, 1)
    recovery = RecoveryConfig(str(tmp_path))
    flow = Dataflow("dedup_resume")
    inp = op.input("inp", flow, TestingSource(items))
    out = twg.dedup("dedup", inp, window=HOUR)
    got: list = []
    op.output("out", out, TestingSink(got))
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # until EOF
    first = ids(got)
    assert len(first) == 15
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # aborts
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)  # resumes
    every = ids(got)
    assert len(every) == len(set(every)), "a duplicate passed after resume"
    assert set(every) == {rid for b in batches for rid in b.column(COLS.record_id).to_pylist()}
