"""/metrics counts the records each warning rule failed, by rule, while rejecting none."""

from __future__ import annotations

import thalweg_bytewax.operators as twg
from tests.contracts.orders_data import orders, orders_batch, orders_contract
from tests.helpers import run_flow
from tests.observability.conftest import get
from thalweg_bytewax.contracts import RuleSet
from thalweg_bytewax.observability import instruments, observe, running_server


def value(text: str, name: str, **labels: str) -> float | None:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_warning_rule_failures_are_counted_per_rule_and_not_as_rejects():
    contract = orders_contract()
    coupon = next(
        r for r in RuleSet.from_contract(contract).rules if r.name == "coupon_mostly_absent"
    )
    observe(port=0)
    server = running_server()
    assert server is not None
    rows = orders(10)
    for row in rows:
        row["coupon"] = "SPRING"  # no order without a coupon: the warning rule fails
    batches = [("orders:0", orders_batch(rows)), ("orders:0", orders_batch(rows, first_offset=10))]
    got = run_flow(
        batches,
        lambda up: twg.validate("validate", up, contract, mode="quarantine"),
        flow_id="warned",
    )
    assert not got["rejected"]
    text = get(server.url + "/metrics")[1].decode()
    step = "warned.validate"
    assert value(text, instruments.RULE_WARNINGS.name, step_id=step, rule_id=coupon.id) == 20
    assert value(text, instruments.REJECTED_RECORDS.name, step_id=step) is None
    assert value(text, instruments.STEP_RECORDS_OUT.name, step_id=step) == 20
