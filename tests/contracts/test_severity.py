"""ODCS quality ``severity``: error rejects, warning and info only report; identity and loading."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from thalweg_bytewax.contracts import (
    ContractError,
    Rule,
    RuleSet,
    Severity,
    merge_rules,
    parse_contract,
)
from thalweg_bytewax.contracts.evaluate import evaluate

_CONTRACT = """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test:severity
name: t
version: 1.0.0
schema:
  - name: t
    properties:
      - name: x
        logicalType: integer
    quality:
      - name: x_mostly_null
        metric: nullValues
        arguments: {{properties: [x]}}
        mustBeGreaterOrEqualTo: 50
        unit: percent
{severity}"""


def contract(severity_line: str):
    return parse_contract(_CONTRACT.format(severity=severity_line), origin="severity.yaml")


def quality_rule(severity_line: str) -> Rule:
    (rule,) = [r for r in RuleSet.from_contract(contract(severity_line)).rules if r.is_batch_rule]
    return rule


def test_a_rule_without_severity_is_an_error_rule_and_keeps_its_id():
    absent = quality_rule("")
    assert absent.severity is Severity.ERROR
    assert quality_rule("        severity: error\n").id == absent.id
    # Ids recorded in DLQ rows and audits before severities existed stay the same.
    assert Rule.ge("x", 0).id == "x_range@4d3b98b6"
    assert absent.id == "x_mostly_null@2b38bae5"


@pytest.mark.parametrize("given", ["warning", "Warning", "WARNING", "info", " Info "])
def test_warning_and_info_are_read_case_insensitively_and_give_a_new_id(given):
    rule = quality_rule(f"        severity: '{given}'\n")
    assert rule.severity is Severity(given.strip().lower())
    assert not rule.severity.rejects
    assert rule.id != quality_rule("").id
    assert rule.definition()["severity"] == given.strip().lower()


@pytest.mark.parametrize("given", ["critical", "fatal", "warn", "''", "'1'"])
def test_an_unknown_severity_is_refused_at_load_naming_the_rule_and_the_allowed_values(given):
    with pytest.raises(ContractError) as caught:
        contract(f"        severity: {given}\n")
    text = str(caught.value)
    assert "severity.yaml" in text and "x_mostly_null" in text and ".severity" in text
    assert "['error', 'warning', 'info']" in text


def test_python_rules_take_the_same_severity():
    assert Rule.not_null("x", severity="warning").severity is Severity.WARNING
    assert Rule.sql("even", "x % 2 = 0", severity="info").severity is Severity.INFO
    metric = Rule.batch_metric("rowCount", op="mustBeGreaterThan", threshold=0, severity="Info")
    assert metric.severity is Severity.INFO
    assert Rule.ge("x", 0, severity="warning").version != Rule.ge("x", 0).version
    with pytest.raises(ContractError, match=r"rule `x_range`: unknown severity 'loud'"):
        Rule.ge("x", 0, severity="loud")


def test_a_warning_rule_never_tightens_an_error_rule_in_the_merge():
    merged = merge_rules([Rule.ge("x", 0)], [Rule.ge("x", 10, severity="warning")])
    assert sorted((r.min, str(r.severity)) for r in merged) == [(0, "error"), (10, "warning")]


def test_a_failing_warning_rule_rejects_no_row_and_is_reported():
    batch = pa.RecordBatch.from_pydict({"x": pa.array([1, None, -1], pa.int64())})
    warn = Rule.not_null("x", severity="warning")
    error = Rule.ge("x", 0)
    ruleset = RuleSet([warn, error])
    ev = evaluate(batch, ruleset)
    assert ev.any_failed.tolist() == [False, False, True]
    assert ev.warned.tolist() == [False, True, False]
    assert ev.failed_rules(ruleset).to_pylist() == [[], [warn.id], [error.id]]
    assert ev.warnings(ruleset) == {0: 1}
    rejecting = ev.rejecting(ruleset)
    assert rejecting.rule_index == (1,)
    assert np.array_equal(rejecting.any_failed, ev.any_failed)
    assert ev.first_failure(ruleset) == (2, 1)


@pytest.mark.parametrize(
    "build",
    [
        lambda s: Rule.not_null("x", severity=s),
        lambda s: Rule.of_type("x", "int64", severity=s),
        lambda s: Rule.unique("x", severity=s),
        lambda s: Rule.one_of("x", ["a", "b"], severity=s),
        lambda s: Rule.between("x", 0, 10, severity=s),
        lambda s: Rule.ge("x", 0, severity=s),
        lambda s: Rule.lt("x", 10, severity=s),
        lambda s: Rule.length("x", 1, 5, severity=s),
        lambda s: Rule.matches("x", "^a", severity=s),
    ],
    ids=[
        "not_null",
        "of_type",
        "unique",
        "one_of",
        "between",
        "ge",
        "lt",
        "length",
        "matches",
    ],
)
def test_every_column_rule_keeps_the_severity_it_is_given(build):
    # `one_of` once dropped its severity: a warning rule rejected rows as an error.
    assert build("warning").severity is Severity.WARNING
    assert build("info").severity is Severity.INFO
    assert build("warning").version != build("error").version
