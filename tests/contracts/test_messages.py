"""DLQ messages written once per set of failed rules equal the per-row list form.

``messages`` names each row's failed rules by a bit set and joins one text per set to
the locators (through the native writer, else Arrow); ``_messages_from_lists`` joins the
per-row lists of failed ids. Both are compared on generated verdicts, with and without
locator columns, nulls in them, and rows picked in any order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.budget import examples
from thalweg_bytewax.contracts import Rule, RuleSet, _row_json_native
from thalweg_bytewax.contracts.evaluate import Evaluation, _messages_from_lists, messages
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()
RULES = RuleSet(
    [Rule.not_null(f"c{i}") for i in range(12)]
    + [Rule.ge(f"c{i}", i) for i in range(12)]
    + [Rule.length("name", 1, 3), Rule.one_of("status", ["A", "B"])]
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.RecordBatch, Evaluation, np.ndarray | None]:
    n = draw(st.integers(1, 30))
    k = len(RULES.rules)
    which = sorted(
        draw(st.sets(st.integers(0, k - 1), min_size=1, max_size=draw(st.sampled_from([3, 17, k]))))
    )
    masks = tuple(
        np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool) for _ in which
    )
    any_failed = np.logical_or.reduce(masks)
    ev = Evaluation(
        n, tuple(which), masks, any_failed, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    )
    columns: dict[str, pa.Array] = {"payload": pa.array(range(n))}
    if draw(st.booleans()):
        topics = (
            st.none() | st.sampled_from(["orders", "é-topic", ""])
            if draw(st.booleans())
            else st.just("t")
        )
        columns[COLS.source_topic] = pa.array(
            draw(st.lists(topics, min_size=n, max_size=n)), pa.string()
        )
        columns[COLS.source_partition] = pa.array(
            draw(st.lists(st.integers(-1, 2**31 - 1), min_size=n, max_size=n)), pa.int32()
        )
        columns[COLS.source_offset] = pa.array(
            draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), pa.int64()
        )
    batch = pa.RecordBatch.from_pydict(columns)
    start = draw(st.integers(0, n - 1))
    if start:  # a batch sliced, its columns starting at an offset
        batch = pa.RecordBatch.from_pydict(
            {
                name: pa.concat_arrays([col.slice(0, start), col]).slice(start)
                for name, col in columns.items()
            }
        )
    rows = None
    if draw(st.booleans()):
        rows = np.array(draw(st.lists(st.integers(0, n - 1), max_size=2 * n)), np.int64)
    elif draw(st.booleans()):
        rows = np.arange(n)
    return batch, ev, rows


@settings(max_examples=examples(300), deadline=None)
@given(cases())
def test_messages_per_set_of_failed_rules_equal_the_per_row_lists(case) -> None:
    batch, ev, rows = case
    failed = ev.failed_rules(RULES)
    expected = _messages_from_lists(batch, ev, RULES, failed, COLS, rows)
    assert (
        messages(batch, ev, RULES, failed, columns=COLS, rows=rows).to_pylist()
        == expected.to_pylist()
    )


def test_messages_spell_locator_first_rule_and_all_failed_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            COLS.source_topic: ["orders", "orders"],
            COLS.source_partition: pa.array([3, 3], pa.int32()),
            COLS.source_offset: pa.array([41, 42], pa.int64()),
            "status": ["C", "A"],
            "name": ["", "ok"],
        }
    )
    rules = RuleSet([Rule.length("name", 1, 3), Rule.one_of("status", ["A", "B"])])
    masks = (np.array([True, False]), np.array([True, False]))
    ev = Evaluation(
        2, (0, 1), masks, np.array([True, False]), np.zeros(2, dtype=bool), np.zeros(2, dtype=bool)
    )
    failed = ev.failed_rules(rules)
    ids = rules.ids.to_pylist()
    want = [
        f"orders:3@41: expected {rules.descriptions[0].as_py()}; failed rules: {ids[0]}, {ids[1]}"
    ]
    assert messages(batch, ev, rules, failed, rows=np.array([0])).to_pylist() == want
    monkeypatch.setattr(_row_json_native, "_native", None)
    assert messages(batch, ev, rules, failed, rows=np.array([0])).to_pylist() == want
