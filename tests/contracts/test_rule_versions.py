"""Rule, drop-rule and rule-set versions are the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from thalweg_bytewax.contracts import DropRule, Rule

_PROGRAM = """
from thalweg_bytewax.contracts import DropRule, Rule
from thalweg_bytewax.contracts import RuleSet
r = Rule.one_of("status", {"NEW", "PAID", "SHIPPED", "CANCELLED", "RETURNED"})
m = Rule.batch_metric("invalidValues", "status", op="mustBeLessThan", threshold=3,
                      values={"NEW", "PAID", "SHIPPED", "CANCELLED"})
d = DropRule.equals("junk", "status", {"HEARTBEAT", "TEST", "PING", "NOOP"})
d2 = DropRule(name="junk2", column="status", values=frozenset({"A", "B", "C", "D"}))
print(r.id, m.id, d.id, d2.id, RuleSet([r, m], [d, d2]).version)
"""


def _ids_under(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.mark.slow
def test_versions_of_set_valued_rules_do_not_depend_on_the_hash_seed():
    seen = {_ids_under(seed) for seed in ("0", "1", "2", "3", "4", "5")}
    assert len(seen) == 1, seen


def test_a_set_and_the_sorted_sequence_of_its_values_give_one_version():
    values = {"b", "a", "c"}
    assert Rule.one_of("s", values).version == Rule.one_of("s", sorted(values)).version
    assert DropRule.equals("d", "s", values).id == DropRule.equals("d", "s", sorted(values)).id


def test_mixed_type_sets_order_stably():
    a = Rule.one_of("s", {1, "1", 2.5, None})
    b = Rule.one_of("s", [None, 1, "1", 2.5][::-1])
    assert a.values == Rule.one_of("s", set(b.values or ())).values
