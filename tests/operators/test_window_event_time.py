"""validate(): a windowed ``unique`` rule clamps producer event time like dedup does.

The rule's window is driven by ``_twg_source_timestamp``; one record stamped in 2100
must neither forget the keys of the window (a repeat would pass) nor pin the window's
clock (every key read afterwards would be held forever).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from tests.contracts.orders_data import COLS, orders, orders_batch, orders_contract
from thalweg_bytewax.contracts import Rule, RuleSet
from thalweg_bytewax.contracts.spec import ContractMode
from thalweg_bytewax.operators._validator import Validator
from thalweg_bytewax.operators.validation import _WindowedLogic

CONTRACT = orders_contract()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
YEAR_2100 = datetime(2100, 1, 1, tzinfo=UTC)


def stamped(batch: pa.RecordBatch, event: list[datetime], ingest: datetime) -> pa.RecordBatch:
    ts = pa.array(event, pa.timestamp("ms", tz="UTC"))
    batch = batch.append_column(pa.field(COLS.source_timestamp, ts.type), ts)
    it = pa.array([ingest] * batch.num_rows, pa.timestamp("us", tz="UTC"))
    return batch.append_column(pa.field(COLS.ingest_ts, it.type), it)


def windowed_logic() -> _WindowedLogic:
    rule = Rule.unique("order_id", window=timedelta(minutes=1))
    ruleset = RuleSet.from_contract(CONTRACT, rules=[rule])
    validator = Validator("validate", ruleset, ContractMode.QUARANTINE, COLS)
    return _WindowedLogic(validator, validator.windowed, None)


def held(logic: _WindowedLogic) -> int:
    ((_, (_, buckets)),) = logic.snapshot()
    return sum(len(keys) for _, keys in buckets)


def offsets(verdict) -> tuple[list[int], list[int]]:
    clean = [] if verdict.clean is None else verdict.clean.column(COLS.source_offset).to_pylist()
    bad = (
        [] if verdict.rejected is None else verdict.rejected.column(COLS.source_offset).to_pylist()
    )
    return clean, bad


def test_a_repeat_after_a_far_future_record_is_still_rejected():
    logic = windowed_logic()
    rows = orders(3)
    (first,), _ = logic.on_item(stamped(orders_batch(rows[:2]), [T0] * 2, T0))
    assert offsets(first) == ([0, 1], [])
    (poison,), _ = logic.on_item(
        stamped(orders_batch(rows[2:], first_offset=10), [YEAR_2100], T0 + timedelta(seconds=5))
    )
    assert offsets(poison) == ([10], [])
    later = T0 + timedelta(seconds=40)  # within the one-minute window
    again = copy.deepcopy(rows[:1])
    (repeat,), _ = logic.on_item(stamped(orders_batch(again, first_offset=20), [later], later))
    assert offsets(repeat) == ([], [20])


def test_keys_held_stay_bounded_after_a_far_future_record():
    # 12 simulated minutes of 40 orders a minute, a batch every 30 s, one in 2100.
    logic = windowed_logic()
    per_batch, batches = 20, 2 * 12
    rows = orders(per_batch * batches)
    most = 0
    for b in range(batches):
        now = T0 + timedelta(seconds=30 * b)
        chunk = rows[per_batch * b : per_batch * (b + 1)]
        times = [now] * len(chunk)
        if b == 6:
            times[0] = YEAR_2100
        logic.on_item(stamped(orders_batch(chunk, first_offset=per_batch * b), times, now))
        most = max(most, held(logic))
    # Window + skew + a bucket is about 2 minutes of keys; the rule stamps keys at the
    # clock, so a future-dated record can add up to one more skew's worth.
    assert most <= 3 * 40 + 2 * per_batch, most
