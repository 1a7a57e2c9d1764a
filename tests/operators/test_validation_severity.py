"""validate() with rules of severity warning/info: reported in the audit and the log, never rejected."""

from __future__ import annotations

import logging
import time
from decimal import Decimal

import pyarrow as pa
import pytest

import thalweg_bytewax.operators as twg
import thalweg_bytewax.operators._validator as validator_module
from tests.contracts.orders_data import COLS, orders, orders_batch, orders_contract
from tests.helpers import run_flow, table_of
from thalweg_bytewax.contracts import Rule, RuleSet
from thalweg_bytewax.contracts.audit import explode_audit
from thalweg_bytewax.contracts.spec import ContractMode
from thalweg_bytewax.lanes.dlq import rejected_from_dlq_batch
from thalweg_bytewax.operators._validator import Validator
from thalweg_bytewax.operators.validation import failed_rules_column

CONTRACT = orders_contract()
RULESET = RuleSet.from_contract(CONTRACT)
RULES = {r.name: r for r in RULESET.rules}
COUPON = RULES["coupon_mostly_absent"]
STATUS = RULES["status_allowed_values"]


def all_coupons(n: int = 12) -> list[dict]:
    """``n`` orders that all carry a coupon: the coupon rule (nulls >= 10%) fails."""
    rows = orders(n)
    for row in rows:
        row["coupon"] = "SPRING"
    return rows


def run(rows, mode, **kwargs):
    got = run_flow(
        [("orders:0", orders_batch(rows))],
        lambda up: twg.validate("validate", up, CONTRACT, mode=mode, **kwargs),
        flow_id="severity_test",
    )
    return [table_of(got[name]) for name in ("clean", "rejected", "audit")]


def test_the_bundled_coupon_rule_is_a_warning():
    assert str(COUPON.severity) == "warning"


def test_a_failing_warning_rule_rejects_nothing_and_the_audit_reports_it():
    rows = all_coupons()
    rows[4]["status"] = "LOST"  # an error rule still rejects
    clean, rejected, audit = run(rows, "quarantine")

    assert sorted(clean[COLS.source_offset].to_pylist()) == [o for o in range(12) if o != 4]
    (dlq,) = rejected_from_dlq_batch(rejected.combine_chunks().to_batches()[0])
    assert dlq.locator is not None and dlq.locator.offset == 4
    assert list(dlq.rules) == [STATUS.id]  # the DLQ names the rules that rejected it
    assert COUPON.id not in dlq.message
    by_offset = {
        o: (v, tuple(f))
        for o, v, f in zip(
            audit[COLS.source_offset].to_pylist(),
            audit["verdict"].to_pylist(),
            audit["failed_rules"].to_pylist(),
            strict=True,
        )
    }
    assert by_offset[4] == ("fail", (STATUS.id, COUPON.id))
    assert {by_offset[o] for o in range(12) if o != 4} == {("warn", (COUPON.id,))}
    # One verdict per (record, rule): the warning rule's is `warn`, on every record.
    per_rule = explode_audit(audit, RULESET.manifest())
    verdicts = {
        (o, rule): v
        for o, rule, v in zip(
            per_rule[COLS.source_offset].to_pylist(),
            per_rule["rule_id"].to_pylist(),
            per_rule["rule_verdict"].to_pylist(),
            strict=True,
        )
    }
    assert {verdicts[(o, COUPON.id)] for o in range(12)} == {"warn"}
    assert verdicts[(4, STATUS.id)] == "fail" and verdicts[(3, STATUS.id)] == "pass"


def test_the_same_rule_as_an_error_rejects_the_rows_as_before():
    error = Rule.batch_metric(
        "nullValues",
        "coupon",
        op="mustBeGreaterOrEqualTo",
        threshold=10,
        unit="percent",
        name="coupon_absent_error",
    )
    clean, rejected, audit = run(all_coupons(), "quarantine", rules=[error])
    assert clean is None
    assert sorted(rejected[COLS.source_offset].to_pylist()) == list(range(12))
    assert set(audit["verdict"].to_pylist()) == {"fail"}


def test_strict_mode_does_not_stop_on_a_warning():
    clean, rejected, audit = run(all_coupons(), "strict")
    assert clean.num_rows == 12 and rejected is None
    assert set(audit["verdict"].to_pylist()) == {"warn"}


def test_annotate_lists_warning_failures_with_the_rest():
    clean, _, _ = run(all_coupons(), "annotate")
    assert clean.num_rows == 12
    assert {tuple(f) for f in clean[failed_rules_column()].to_pylist()} == {(COUPON.id,)}


def test_warnings_are_logged_once_per_rule_and_interval_not_per_record(caplog, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    judge = Validator("v", RULESET, ContractMode.QUARANTINE, COLS)
    batch = orders_batch(all_coupons())
    caplog.set_level(logging.WARNING, logger=validator_module.__name__)

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    judge.run(batch)
    assert len(lines()) == 1
    assert COUPON.id in lines()[0] and "12 record(s) in 1 batch(es)" in lines()[0]
    for _ in range(5):  # within the interval: counted, not logged
        now[0] += 1.0
        judge.run(batch)
    assert len(lines()) == 1
    now[0] += validator_module.WARNING_LOG_INTERVAL_S
    judge.run(batch)
    assert len(lines()) == 2
    assert "72 record(s) in 6 batch(es)" in lines()[1]


def test_a_batch_that_meets_the_warning_rule_passes_clean():
    rows = orders(12)
    for i, row in enumerate(rows):
        row["coupon"] = None if i % 2 else "SPRING"
    verdict = Validator("v", RULESET, ContractMode.QUARANTINE, COLS).run(orders_batch(rows))
    assert verdict.rejected is None and verdict.clean is not None
    assert verdict.audit is not None
    assert set(verdict.audit["verdict"].to_pylist()) == {"pass"}


@pytest.mark.parametrize("severity", ["warning", "info"])
def test_manual_rules_take_a_severity_too(severity):
    rule = Rule.sql("tiny_total", "total > 1", severity=severity)
    rows = orders(6)
    rows[2]["total"] = Decimal("0.50")
    clean, rejected, audit = run(rows, "quarantine", rules=[rule])
    assert rejected is None and clean.num_rows == 6
    verdicts = dict(
        zip(audit[COLS.source_offset].to_pylist(), audit["verdict"].to_pylist(), strict=True)
    )
    assert verdicts[2] == "warn"
    assert isinstance(audit, pa.Table)
