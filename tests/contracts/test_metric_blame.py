"""A failing count metric blames the rows that caused the failure, by side of the threshold.

Too high: the rows that contribute (the nulls, the invalid values, the duplicates). Too
low: the rows that do not (too few nulls is the fault of the rows that have a value).
No side (``mustNotBe``, ``mustNotBeBetween``, no comparable threshold): the whole batch.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from thalweg_bytewax.contracts import MetricOp, Rule, RuleSet
from thalweg_bytewax.contracts.evaluate import evaluate

# Three nulls of four rows: nullValues is 3 (75 percent).
VALUES = [1, None, None, None]
NULLS = [False, True, True, True]
PRESENT = [True, False, False, False]
EVERY = [True, True, True, True]


def failed(rule: Rule, values: list) -> list[bool]:
    batch = pa.RecordBatch.from_pydict({"x": pa.array(values, pa.int64())})
    got: list[bool] = evaluate(batch, RuleSet([rule])).any_failed.tolist()
    return got


@pytest.mark.parametrize(
    ("op", "threshold", "unit", "expected"),
    [
        # Too low: the rows with a value are why there are too few nulls.
        pytest.param(MetricOp.GT, 3, "rows", PRESENT, id="greater-than-low"),
        pytest.param(MetricOp.GE, 4, "rows", PRESENT, id="greater-or-equal-low"),
        pytest.param(MetricOp.GE, 90, "percent", PRESENT, id="greater-or-equal-percent-low"),
        pytest.param(MetricOp.BETWEEN, (4, 5), "rows", PRESENT, id="between-below"),
        pytest.param(MetricOp.MUST_BE, 4, "rows", PRESENT, id="must-be-below"),
        # Too high: the nulls themselves.
        pytest.param(MetricOp.LT, 3, "rows", NULLS, id="less-than-high"),
        pytest.param(MetricOp.LE, 2, "rows", NULLS, id="less-or-equal-high"),
        pytest.param(MetricOp.LE, 50, "percent", NULLS, id="less-or-equal-percent-high"),
        pytest.param(MetricOp.BETWEEN, (0, 2), "rows", NULLS, id="between-above"),
        pytest.param(MetricOp.MUST_BE, 2, "rows", NULLS, id="must-be-above"),
        # No side: every row.
        pytest.param(MetricOp.MUST_NOT_BE, 3, "rows", EVERY, id="must-not-be"),
        pytest.param(MetricOp.NOT_BETWEEN, (2, 4), "rows", EVERY, id="not-between"),
    ],
)
def test_a_failing_null_count_blames_the_rows_on_the_side_it_failed(op, threshold, unit, expected):
    rule = Rule.batch_metric("nullValues", "x", op=op, threshold=threshold, unit=unit)
    assert failed(rule, VALUES) == expected


def test_too_few_duplicates_blames_the_rows_that_repeat_no_earlier_row():
    # duplicateValues counts the repeats (the second 1); every other row is blamed.
    rule = Rule.batch_metric("duplicateValues", "x", op="mustBeGreaterOrEqualTo", threshold=3)
    assert failed(rule, [1, 1, 2, 3]) == [True, False, True, True]


def test_too_few_invalid_values_blames_the_valid_and_null_rows():
    rule = Rule.batch_metric(
        "invalidValues", "x", op="mustBeGreaterThan", threshold=1, values=[1, 2]
    )
    assert failed(rule, [1, 2, 9, None]) == [True, True, False, True]


def test_too_few_missing_values_blames_the_present_rows():
    rule = Rule.batch_metric(
        "missingValues", "x", op="mustBeGreaterOrEqualTo", threshold=3, values=[0]
    )
    assert failed(rule, [0, None, 5, 6]) == [False, False, True, True]


def test_a_threshold_that_does_not_compare_blames_the_whole_batch():
    rule = Rule.batch_metric("nullValues", "x", op="mustBeGreaterThan", threshold="many")
    assert failed(rule, VALUES) == EVERY


def test_the_orders_coupon_rule_blames_the_coupon_rows_of_a_small_batch():
    # Coupons on 4 of 4 orders: under 10% without one. The coupon rows are the signal.
    rule = Rule.batch_metric(
        "nullValues", "x", op="mustBeGreaterOrEqualTo", threshold=10, unit="percent"
    )
    assert (
        failed(rule, [1, 2, None, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        == [True] * 2 + [False] + [True] * 9
    )
