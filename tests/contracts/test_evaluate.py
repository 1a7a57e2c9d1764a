"""Rule evaluation: every rule kind, ODCS batch metrics, type conformance and the SQL sandbox."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from thalweg_bytewax.contracts import ContractError, Rule, RuleSet
from thalweg_bytewax.contracts.evaluate import evaluate
from thalweg_bytewax.sql.engine import shared_cursor


def failed(rule, values, type_=None):
    batch = pa.RecordBatch.from_pydict({"x": pa.array(values, type_)})
    return evaluate(batch, RuleSet([rule])).any_failed.tolist()


@pytest.mark.parametrize(
    ("rule", "values", "expected"),
    [
        pytest.param(Rule.not_null("x"), [1, None], [False, True], id="not_null"),
        pytest.param(
            Rule.unique("x"), [1, 2, 1, None, None], [False, False, True, False, False], id="unique"
        ),
        pytest.param(
            Rule.one_of("x", ["a", "b"]), ["a", "c", None], [False, True, False], id="one_of"
        ),
        pytest.param(Rule.gt("x", 0), [0, 1, None], [True, False, False], id="gt"),
        pytest.param(Rule.lt("x", 2), [1, 2], [False, True], id="lt"),
        pytest.param(Rule.length("x", 2, 3), ["a", "ab", "abcd"], [True, False, True], id="length"),
        pytest.param(
            Rule.matches("x", "^[0-9]+$"), ["12", "1a", None], [False, True, False], id="matches"
        ),
        pytest.param(Rule.sql("even", "x % 2 = 0"), [2, 3, None], [False, True, False], id="sql"),
    ],
)
def test_row_rules(rule, values, expected):
    assert failed(rule, values) == expected


def test_type_conformance():
    assert failed(Rule.of_type("x", pa.int64()), [1, 2], pa.int32()) == [False, False]
    assert failed(Rule.of_type("x", pa.int64()), ["1", "x", None]) == [False, True, False]
    batch = pa.RecordBatch.from_pydict({"y": [1]})
    assert evaluate(batch, RuleSet([Rule.of_type("x", pa.int64())])).any_failed.tolist() == [True]
    ev = evaluate(batch, RuleSet([Rule.of_type("x", pa.int64()), Rule.not_null("x")]))
    assert ev.contract_failed.tolist() == [True]


def test_integer_types_refuse_values_a_cast_would_round():
    int64 = Rule.of_type("x", pa.int64())
    assert failed(int64, [1.0, 1.5, 2.7, None], pa.float64()) == [False, True, True, False]
    assert failed(int64, [float("nan"), float("inf"), -3.0], pa.float64()) == [True, True, False]
    assert failed(int64, [1.0, 0.5], pa.float32()) == [False, True]
    assert failed(int64, ["1", "1.5", "x", "1.0", " 7 ", "1e3", "2.01e0"]) == [
        False,
        True,
        True,
        False,
        False,
        False,
        True,
    ]
    assert failed(Rule.of_type("x", pa.int8()), [300, 1], pa.int64()) == [True, False]
    decimals = pa.array([Decimal("1.000"), Decimal("1.500")], pa.decimal128(10, 3))
    assert failed(int64, decimals) == [False, True]


def test_decimal_types_refuse_values_with_more_scale_than_the_target():
    dec = Rule.of_type("x", pa.decimal128(10, 2))
    source = pa.array([Decimal("1.230"), Decimal("1.234")], pa.decimal128(10, 3))
    assert failed(dec, source) == [False, True]
    assert failed(dec, ["1.23", "1.234", "1.2300", "0.1"]) == [False, True, False, False]
    assert failed(dec, [0.25, 0.125], pa.float64()) == [False, True]
    assert failed(dec, [10**9], pa.int64()) == [True]


def test_metric_rules_with_count_and_percent_thresholds():
    nulls = Rule.batch_metric(
        "nullValues", "x", op="mustBeLessOrEqualTo", threshold=25, unit="percent"
    )
    assert failed(nulls, [1, None, 3, 4]) == [False, False, False, False]  # 25% is fine
    assert failed(nulls, [1, None, None, 4]) == [False, True, True, False]  # 50%: the nulls fail
    dups = Rule.batch_metric("duplicateValues", "x", op="mustBe", threshold=0)
    assert failed(dups, [1, 1, 2]) == [False, True, False]
    invalid = Rule.batch_metric(
        "invalidValues", "x", op="mustBeLessThan", threshold=1, values=["a"]
    )
    assert failed(invalid, ["a", "b"]) == [False, True]
    rows = Rule.batch_metric("rowCount", op="mustBeGreaterOrEqualTo", threshold=3)
    assert failed(rows, [1, 2]) == [True, True]
    sql = Rule.batch_metric(
        "sql", op="mustBe", threshold=0, expression="SELECT count(*) FROM batch WHERE x < 0"
    )
    assert failed(sql, [1, -1]) == [True, True]
    assert failed(sql, [1, 2]) == [False, False]


def test_rule_versions_follow_the_definition():
    assert Rule.ge("x", 0).id == Rule.ge("x", 0).id
    assert Rule.ge("x", 0).version != Rule.ge("x", 1).version
    assert Rule.unique("x").version != Rule.unique("x", window=timedelta(hours=1)).version
    assert Rule.ge("x", 0, name="a").version == Rule.ge("x", 0, name="b").version


def test_bad_patterns_fail_when_the_rule_set_is_built():
    with pytest.raises(ContractError, match="does not compile"):
        RuleSet([Rule.matches("x", "(unclosed")])


def test_duckdb_is_sandboxed():
    cur = shared_cursor()
    with pytest.raises(duckdb.PermissionException, match="(?i)permission|disabled"):
        cur.sql("SELECT * FROM read_csv('/etc/hostname')").fetchall()
    with pytest.raises(duckdb.InvalidInputException, match="(?i)lock|configuration"):
        cur.execute("SET enable_external_access=true")
    batch = pa.RecordBatch.from_pydict({"x": [1]})
    # A rule set's own session refuses the read too; the rule fails its rows (never raises).
    rs = RuleSet([Rule.sql("leak", "x IN (SELECT 1 FROM read_csv('/etc/hostname'))")])
    assert evaluate(batch, rs).any_failed.tolist() == [True]
    assert rs.sql_failures == {rs.rules[0].id: 1}
    with pytest.raises(duckdb.PermissionException, match="(?i)permission|disabled"):
        rs.session.cursor().sql("SELECT * FROM read_csv('/etc/hostname')").fetchall()
    with pytest.raises(duckdb.InvalidInputException, match="(?i)lock|configuration"):
        rs.session.cursor().execute("SET enable_external_access=true")


@pytest.mark.parametrize("type_", [pa.float32(), pa.float64()])
def test_range_rules_fail_nan_and_pass_null(type_):
    # A NaN in the column's own width, built by pyarrow (pandas is not a dependency).
    values = pa.array([5.0, float("nan"), 500.0, -1.0, 0.0], type=type_)
    values = pa.concat_arrays([values, pa.nulls(1, type_)])
    assert failed(Rule.le("x", 100), values) == [False, True, True, False, False, False]
    assert failed(Rule.ge("x", 0), values) == [False, True, False, True, False, False]
    assert failed(Rule.lt("x", 100), values) == [False, True, True, False, False, False]
    assert failed(Rule.gt("x", -10), values) == [False, True, False, False, False, False]
    assert failed(Rule.between("x", 0, 100), values) == [False, True, True, True, False, False]
    # A non-floating column has no NaN: the rule is unchanged there.
    assert failed(Rule.between("x", 0, 100), [5, 500, None]) == [False, True, False]
