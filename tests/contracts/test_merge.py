"""Tightest-wins merge (ADR-0016/0036): neither a manual nor a contract rule can loosen the other.

Acceptance is measured with the real evaluator: the merged rule set accepts a value iff
both the contract rule and the manual rule accept it, whichever side is tighter.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from types import FrameType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.contracts import (
    ContractError,
    Rule,
    RuleOrigin,
    RuleSet,
    merge_rules,
)
from thalweg_bytewax.contracts.evaluate import evaluate

ints = st.integers(-50, 50)
bounds = st.one_of(st.none(), ints)


def accepts(rules, values, type_):
    batch = pa.RecordBatch.from_pydict({"x": pa.array(values, type_)})
    ev = evaluate(batch, RuleSet(list(rules)))
    return ~ev.any_failed


@st.composite
def ranges(draw):
    return Rule.between(
        "x",
        draw(bounds),
        draw(bounds),
        min_inclusive=draw(st.booleans()),
        max_inclusive=draw(st.booleans()),
    )


VALUES = list(range(-55, 56))


@given(contract=ranges(), manual=ranges())
def test_range_merge_is_the_intersection_both_ways(contract, manual):
    for a, b in ((contract, manual), (manual, contract)):
        merged = merge_rules([a], [b])
        assert len(merged) == 1
        got = accepts(merged, VALUES, pa.int64())
        want = accepts([a], VALUES, pa.int64()) & accepts([b], VALUES, pa.int64())
        assert (got == want).all()
    assert (
        merge_rules([contract], [manual])[0].version == merge_rules([manual], [contract])[0].version
    )


@given(
    contract=st.lists(st.sampled_from("abcdefg"), min_size=1, unique=True),
    manual=st.lists(st.sampled_from("abcdefg"), min_size=1, unique=True),
)
def test_allowed_values_merge_is_the_intersection_both_ways(contract, manual):
    values = list("abcdefgh") + [None]
    a, b = Rule.one_of("x", contract), Rule.one_of("x", manual)
    for first, second in ((a, b), (b, a)):
        got = accepts(merge_rules([first], [second]), values, pa.string())
        want = accepts([a], values, pa.string()) & accepts([b], values, pa.string())
        assert (got == want).all()


@given(
    lo1=st.one_of(st.none(), st.integers(0, 6)),
    hi1=st.one_of(st.none(), st.integers(0, 6)),
    lo2=st.one_of(st.none(), st.integers(0, 6)),
    hi2=st.one_of(st.none(), st.integers(0, 6)),
)
def test_length_merge_is_the_intersection_both_ways(lo1, hi1, lo2, hi2):
    values = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg"]
    a, b = Rule.length("x", lo1, hi1), Rule.length("x", lo2, hi2)
    for first, second in ((a, b), (b, a)):
        got = accepts(merge_rules([first], [second]), values, pa.string())
        want = accepts([a], values, pa.string()) & accepts([b], values, pa.string())
        assert (got == want).all()


@given(contract=ranges(), manual=ranges())
def test_a_manual_rule_never_loosens_the_contract(contract, manual):
    merged = merge_rules([contract], [manual])
    got = accepts(merged, VALUES, pa.int64())
    assert not (got & ~accepts([contract], VALUES, pa.int64())).any()
    assert not (got & ~accepts([manual], VALUES, pa.int64())).any()


def test_not_null_and_unique_and_conjunctive_kinds():
    merged = merge_rules([Rule.not_null("x")], [Rule.not_null("x")])
    assert merged == (Rule.not_null("x"),)
    # Patterns and SQL predicates both apply: keeping both is the tightest combination.
    both = merge_rules([Rule.matches("x", "^a")], [Rule.matches("x", "b$")])
    assert len(both) == 2
    assert len({r.id for r in both}) == 2
    assert accepts(both, ["ab", "a", "b", "xb"], pa.string()).tolist() == [
        True,
        False,
        False,
        False,
    ]


def test_an_identical_rule_keeps_its_identity_and_a_new_bound_gets_a_new_version():
    contract = Rule.between("x", 0, 100)
    contract = type(contract)(**{**contract.__dict__, "origin": RuleOrigin.CONTRACT})
    assert merge_rules([contract], [Rule.between("x", -5, 200)]) == (contract,)
    tighter = merge_rules([contract], [Rule.le("x", Decimal("50"))])[0]
    assert tighter.origin is RuleOrigin.MERGED
    assert tighter.name == "x_range"
    assert tighter.version != contract.version


def test_conflicting_types_refuse_to_merge():
    with pytest.raises(ContractError, match="disagree"):
        merge_rules([Rule.of_type("x", pa.int64())], [Rule.of_type("x", pa.string())])


def _evaluate_counting_lines(batch: pa.RecordBatch, ruleset: RuleSet) -> tuple[int, Any]:
    """Evaluate ``ruleset`` over ``batch``; return the Python lines executed and the result."""
    executed = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal executed
        executed += event == "line"
        return tracer

    previous = sys.gettrace()  # a coverage tracer, say: put back afterwards
    sys.settrace(tracer)
    try:
        ev = evaluate(batch, ruleset)
    finally:
        sys.settrace(previous)
    return executed, ev


def test_merged_ruleset_evaluates_without_python_row_loops():
    # One mask per failing rule, computed by columnar kernels: the Python lines the
    # evaluation executes do not grow with the rows (a per-row loop would add lines).
    rules = RuleSet(list(merge_rules([Rule.between("x", 0, 10)], [Rule.not_null("x")])))
    small = pa.RecordBatch.from_pydict({"x": pa.array([1, None, 11, 5])})
    large = pa.RecordBatch.from_pydict({"x": pa.array([1, None, 11, 5] * 10_000)})
    _evaluate_counting_lines(small, rules)  # warm any lazily built state
    small_lines, ev = _evaluate_counting_lines(small, rules)
    large_lines, large_ev = _evaluate_counting_lines(large, rules)
    assert ev.any_failed.tolist() == [False, True, True, False]
    assert isinstance(ev.masks[0], np.ndarray)
    assert large_ev.any_failed.tolist() == [False, True, True, False] * 10_000
    assert large_lines == small_lines
