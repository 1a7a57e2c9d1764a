"""validate(): the three modes, drop rules, the DLQ and the audit, in real Bytewax runs."""

from __future__ import annotations

import copy
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pytest
from bytewax.errors import BytewaxRuntimeError
from bytewax.testing import run_main

import thalweg_bytewax.operators as twg
from tests.contracts.orders_data import COLS, orders, orders_batch, orders_contract
from tests.fixtures.flows import EntryPoint
from tests.helpers import cause_of, located, locator_of, run_flow, table_of
from thalweg_bytewax.contracts import (
    ContractError,
    ContractViolationError,
    DropRule,
    Rule,
    RuleSet,
    explode_audit,
)
from thalweg_bytewax.contracts.evaluate import drop_masks, evaluate
from thalweg_bytewax.contracts.spec import ContractMode
from thalweg_bytewax.dedup.key_memory import SeenWindow
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes.dlq import dlq_schema, rejected_from_dlq_batch
from thalweg_bytewax.operators._validator import Validator
from thalweg_bytewax.operators.validation import failed_rules_column
from thalweg_bytewax.records import MetadataColumns

CONTRACT = orders_contract()
RULES = {r.name: r.id for r in RuleSet.from_contract(CONTRACT).rules}


def bad_rows() -> tuple[list[dict], dict[int, set[str]]]:
    """20 orders; rows 3, 5, 7, 11 are bad. Returns rows and offset -> failed rule names."""
    rows = orders(20)
    rows[3]["status"] = "LOST"
    rows[5]["total"] = None
    rows[7]["currency"] = "eu"
    rows[11]["customer_id"] = 0
    rows[11]["status"] = "??"
    expected = {
        3: {"status_allowed_values"},
        5: {"total_not_null"},
        7: {"currency_length", "currency_pattern"},
        11: {"customer_id_range", "status_allowed_values"},
    }
    return rows, expected


def run(batches, mode, *, entry_point: EntryPoint = run_main, **kwargs):
    got = run_flow(
        batches,
        lambda up: twg.validate("validate", up, CONTRACT, mode=mode, **kwargs),
        flow_id="validate_test",
        entry_point=entry_point,
    )
    return [table_of(got[name]) for name in ("clean", "rejected", "audit")]


def test_quarantine_diverts_exactly_the_bad_rows_with_reason_and_rule_ids(entry_point):
    rows, expected = bad_rows()
    clean, rejected, audit = run(
        [("orders:0", orders_batch(rows))], "quarantine", entry_point=entry_point
    )

    assert sorted(clean[COLS.source_offset].to_pylist()) == sorted(set(range(20)) - set(expected))
    assert rejected.schema == dlq_schema()
    got = {
        locator_of(r).offset: r
        for r in rejected_from_dlq_batch(rejected.combine_chunks().to_batches()[0])
    }
    assert set(got) == set(expected)
    for offset, names in expected.items():
        assert set(got[offset].rules) == {RULES[n] for n in names}
        assert got[offset].step_id == "validate_test.validate"
        assert got[offset].record_id is not None
        row_json = got[offset].row_json
        assert row_json is not None and rows[offset]["order_id"] in row_json
        assert f"orders:0@{offset}" in got[offset].message
    # A schema (required) failure is `contract`; value rules are `dq`.
    assert str(got[5].reason) == "contract"
    assert {str(got[o].reason) for o in (3, 7, 11)} == {"dq"}

    assert audit.num_rows == 20
    verdicts = dict(
        zip(audit[COLS.source_offset].to_pylist(), audit["verdict"].to_pylist(), strict=True)
    )
    assert {o for o, v in verdicts.items() if v == "fail"} == set(expected)


def test_quarantine_keeps_batch_order_across_reasons_and_shares_a_whole_batch():
    rows = orders(6)
    for i, row in enumerate(rows):
        if i % 2:
            row["total"] = None  # required: a contract reject
        else:
            row["status"] = "LOST"  # not an allowed value: a quality reject
    batch = orders_batch(rows)
    ruleset = RuleSet.from_contract(CONTRACT)
    verdict = Validator("v", ruleset, ContractMode.QUARANTINE, COLS).run(batch)

    rejected = verdict.rejected
    assert verdict.clean is None and rejected is not None
    assert rejected[COLS.source_offset].to_pylist() == list(range(6))
    assert rejected["reason"].to_pylist() == ["dq", "contract"] * 3
    assert [m.split(":", 2)[1] for m in rejected["message"].to_pylist()] == [
        f"0@{i}" for i in range(6)
    ]
    # Rejected whole: the source columns are the batch's own, not copies.
    for name in (COLS.source_topic, COLS.source_offset, COLS.record_id):
        assert rejected[name].buffers()[-1].address == batch[name].buffers()[-1].address


def test_strict_fails_the_flow_with_rule_column_value_and_locator(entry_point):
    rows, _ = bad_rows()
    with pytest.raises(BytewaxRuntimeError) as info:
        run(
            [
                ("orders:0", orders_batch(rows[:3])),
                ("orders:0", orders_batch(rows, first_offset=100)),
            ],
            "strict",
            entry_point=entry_point,
        )
    cause = cause_of(info.value, ContractViolationError)
    msg = str(cause)
    assert RULES["status_allowed_values"] in msg
    assert "`status`" in msg
    assert "'LOST'" in msg
    assert "`orders:0@103`" in msg
    assert cause.locator == "orders:0@103"


def test_annotate_passes_everything_and_lists_failed_rules(entry_point):
    rows, expected = bad_rows()
    clean, rejected, audit = run(
        [("orders:0", orders_batch(rows))], "annotate", entry_point=entry_point
    )
    assert rejected is None
    assert clean.num_rows == 20
    listed = dict(
        zip(
            clean[COLS.source_offset].to_pylist(),
            clean[failed_rules_column()].to_pylist(),
            strict=True,
        )
    )
    for offset in range(20):
        names = expected.get(offset, set())
        assert set(listed[offset]) == {RULES[n] for n in names}
    assert audit.num_rows == 20


def test_drop_rules_are_silent_by_default_and_never_reach_the_dlq():
    rows, expected = bad_rows()
    rows[3]["status"] = "HEARTBEAT"  # junk that would otherwise fail status_allowed_values
    drop = [DropRule.equals("heartbeats", "status", ["HEARTBEAT"])]
    clean, rejected, audit = run([("orders:0", orders_batch(rows))], "quarantine", drop=drop)
    assert 3 not in clean[COLS.source_offset].to_pylist()
    assert 3 not in rejected[COLS.source_offset].to_pylist()
    assert 3 not in audit[COLS.source_offset].to_pylist()
    assert rejected.num_rows == len(expected) - 1

    audited = [DropRule.sql("heartbeats", "status = 'HEARTBEAT'", audit=True)]
    _, rejected, audit = run([("orders:0", orders_batch(rows))], "quarantine", drop=audited)
    assert 3 not in rejected[COLS.source_offset].to_pylist()
    dropped = audit.filter(pa.compute.equal(audit["verdict"], "drop"))
    assert dropped[COLS.source_offset].to_pylist() == [3]
    assert dropped["failed_rules"].to_pylist() == [[audited[0].id]]


def test_manual_rules_merge_tightest_wins_in_the_flow():
    rows = orders(30)
    limit = sorted(r["total"] for r in rows)[15]
    clean, rejected, _ = run(
        [("orders:0", orders_batch(rows))], "quarantine", rules=[Rule.le("total", limit)]
    )
    assert clean.num_rows == 16
    assert rejected.num_rows == 14
    # The merged rule keeps the contract's lower bound (>= 0) and adds the upper one.
    merged = {
        r.name: r for r in RuleSet.from_contract(CONTRACT, rules=[Rule.le("total", limit)]).rules
    }
    assert merged["total_range"].min == 0
    assert merged["total_range"].max == limit


def test_manual_rule_on_missing_column_is_refused_at_build():
    with pytest.raises(ContractError, match="missing column.*'totl'"):
        run([], "quarantine", rules=[Rule.ge("totl", 0)])


def test_windowed_unique_rejects_repeats_across_batches(entry_point):
    rows = orders(10)
    again = copy.deepcopy(rows[2:4])
    rule = Rule.unique("order_id", window=timedelta(hours=1))
    batches = [("orders:0", orders_batch(rows)), ("orders:0", orders_batch(again, first_offset=50))]
    clean, rejected, _ = run(batches, "quarantine", rules=[rule], entry_point=entry_point)
    assert clean.num_rows == 10
    assert sorted(rejected[COLS.source_offset].to_pylist()) == [50, 51]
    ruleset = RuleSet.from_contract(CONTRACT, rules=[rule])
    unique_id = next(
        r.id for r in ruleset.rules if r.kind == "unique" and r.columns == ("order_id",)
    )
    assert all(unique_id in ids for ids in rejected["rules"].to_pylist())


def test_windowed_unique_accepts_the_corrected_resend_of_a_rejected_row(entry_point):
    rows = orders(3)
    bad = copy.deepcopy(rows[1])
    bad["status"] = "LOST"  # rejected by the contract's allowed values
    rule = Rule.unique("order_id", window=timedelta(hours=1))
    batches = [
        ("orders:0", orders_batch([rows[0], bad])),
        ("orders:0", orders_batch(rows[1:], first_offset=10)),  # corrected re-send + new
        ("orders:0", orders_batch([rows[1]], first_offset=20)),  # a true repeat
    ]
    clean, rejected, _ = run(batches, "quarantine", rules=[rule], entry_point=entry_point)
    assert sorted(clean[COLS.source_offset].to_pylist()) == [0, 10, 11]
    offsets = rejected[COLS.source_offset].to_pylist()
    got = dict(zip(offsets, rejected["rules"].to_pylist(), strict=True))
    assert sorted(got) == [1, 20]
    assert [r.split("@")[0] for r in got[1]] == ["status_allowed_values"]
    assert [r.split("@")[0] for r in got[20]] == ["order_id_unique"]


def test_audit_is_complete_and_a_rule_change_never_alters_earlier_verdicts():
    rows = orders(40)
    first = [("orders:0", orders_batch(rows[:20]))]
    second = [("orders:0", orders_batch(rows[20:], first_offset=20))]
    limit = sorted(r["total"] for r in rows)[20]
    v1 = RuleSet.from_contract(CONTRACT)
    v2 = RuleSet.from_contract(CONTRACT, rules=[Rule.le("total", limit)])
    assert v1.version != v2.version

    _, _, audit1 = run(first, "annotate")
    _, _, audit2 = run(second, "annotate", rules=[Rule.le("total", limit)])
    before = explode_audit(audit1, v1.manifest())
    audit = pa.concat_tables([audit1, audit2])
    registry = pa.concat_tables([v1.manifest(), v2.manifest()])
    verdicts = explode_audit(audit, registry)

    # Completeness: every record has a verdict on every rule of its rule set.
    assert verdicts.num_rows == 20 * len(v1.rules) + 20 * len(v2.rules)
    # Immutability: the run-1 verdicts read back unchanged after the rule change.
    again = verdicts.filter(pa.compute.equal(verdicts["ruleset_version"], v1.version))
    assert (
        again.select(["_twg_source_offset", "rule_id", "rule_verdict"])
        .sort_by([("_twg_source_offset", "ascending"), ("rule_id", "ascending")])
        .equals(
            before.select(["_twg_source_offset", "rule_id", "rule_verdict"]).sort_by(
                [("_twg_source_offset", "ascending"), ("rule_id", "ascending")]
            )
        )
    )
    # Run 1 records over the new limit passed total_range under v1 (they are in run 1).
    old_range = {r.name: r.id for r in v1.rules}["total_range"]
    new_range = {r.name: r.id for r in v2.rules}["total_range"]
    assert old_range != new_range
    r1 = verdicts.filter(pa.compute.equal(verdicts["rule"], "total_range")).to_pylist()
    assert {v["rule_id"] for v in r1 if v["_twg_source_offset"] < 20} == {old_range}
    assert all(v["rule_verdict"] == "pass" for v in r1 if v["_twg_source_offset"] < 20)
    fails = {v["_twg_source_offset"] for v in r1 if v["rule_verdict"] == "fail"}
    assert fails == {20 + i for i, r in enumerate(rows[20:]) if r["total"] > limit}


def test_verdicts_per_partition_do_not_depend_on_the_worker_count(entry_point):
    # Four stream keys through keyed window state: with two workers the keys split
    # between them, and each key's window sees only its own records (the same order ids
    # in other partitions are not repeats).
    rows, expected = bad_rows()
    again = copy.deepcopy(rows[:2])
    rule = Rule.unique("order_id", window=timedelta(hours=1))
    batches = [(f"orders:{p}", orders_batch(rows, partition=p)) for p in range(4)]
    batches += [
        (f"orders:{p}", orders_batch(again, partition=p, first_offset=50)) for p in range(4)
    ]
    clean, rejected, audit = run(batches, "quarantine", rules=[rule], entry_point=entry_point)
    good = set(range(20)) - set(expected)
    repeats = {50, 51}
    assert sorted(located(clean)) == [(p, o) for p in range(4) for o in sorted(good)]
    assert sorted(located(rejected)) == [
        (p, o) for p in range(4) for o in sorted(set(expected) | repeats)
    ]
    assert sorted(located(audit)) == [(p, o) for p in range(4) for o in [*range(20), 50, 51]]
    assert np.unique(rejected[COLS.source_partition].to_numpy()).tolist() == [0, 1, 2, 3]


def test_strict_message_names_the_failing_row_of_a_batch_without_locator_columns():
    batch = pa.RecordBatch.from_pydict({"total": [5.0, 7.0, 250.0]})
    validator = Validator(
        "v", RuleSet([Rule.between("total", 0, 100)]), ContractMode.STRICT, MetadataColumns()
    )
    with pytest.raises(ContractViolationError, match="at `row 2`") as info:
        validator.run(batch)
    assert info.value.locator == "row 2"


def test_dlq_row_json_spells_out_non_finite_floats():
    inf, nan = float("inf"), float("nan")
    batch = pa.RecordBatch.from_pydict(
        {
            "total": [5.0, nan, inf, -inf, 6.0],
            "parts": pa.array([[1.0], [1.0], [1.0], [1.0], [nan, -inf]], pa.list_(pa.float32())),
        }
    )
    rules = [Rule.between("total", 0, 100), Rule.sql("parts_finite", "list_max(parts) < 10")]
    validator = Validator("v", RuleSet(rules), ContractMode.QUARANTINE, MetadataColumns())
    rejected = validator.run(batch).rejected
    assert rejected is not None
    assert sorted(rejected["row_json"].to_pylist()) == sorted(
        [
            '{"total":"NaN","parts":[1.0]}',
            '{"total":"Infinity","parts":[1.0]}',
            '{"total":"-Infinity","parts":[1.0]}',
            '{"total":6.0,"parts":["NaN","-Infinity"]}',
        ]
    )


def test_a_drop_rule_on_a_column_the_contract_lacks_fails_at_build_time():
    rows = [("orders:0", orders_batch(orders(3)))]
    with pytest.raises(ContractError, match="drop rule `junk` is on a missing column.*'stauts'"):
        run(rows, "quarantine", drop=[DropRule.equals("junk", "stauts", ["TEST"])])
    with pytest.raises(ContractError, match="drop rule `junk`.*invalid"):
        run(rows, "quarantine", drop=[DropRule.sql("junk", "stauts = 'TEST'")])


@pytest.mark.parametrize(
    ("rules", "drop", "named"),
    [
        ([Rule.one_of("stauts", ["NEW"])], [], r"rule `stauts_allowed_values@\w+`"),
        ([Rule.between("totl", 0, 10)], [], r"rule `totl_range@\w+`"),
        ([Rule.unique("id", "sku", window=timedelta(hours=1))], [], r"rule `id_sku_unique@\w+`"),
        ([], [DropRule.equals("junk", "stauts", ["TEST"])], r"drop rule `drop:junk@\w+`"),
    ],
)
def test_without_a_contract_a_rule_on_a_column_the_batch_lacks_fails_on_the_first_batch(
    rules, drop, named
):
    batch = pa.RecordBatch.from_pydict({"id": [1, 2], "status": ["NEW", "TEST"], "total": [1, 2]})
    ruleset = RuleSet(rules, drop)
    validator = Validator("v", ruleset, ContractMode.QUARANTINE, MetadataColumns())
    with pytest.raises(ContractError, match=rf"validate `v`: {named} is on column '\w+', which"):
        validator.run(batch, {0: SeenWindow(timedelta(hours=1))} if validator.windowed else None)
    with pytest.raises(ContractError, match="which the batch lacks"):
        evaluate_and_drop(batch, ruleset)


def evaluate_and_drop(batch, ruleset):
    drop_masks(batch, ruleset.drop)
    evaluate(batch, ruleset)


def test_not_null_and_type_rules_on_a_missing_column_still_fail_every_row():
    batch = pa.RecordBatch.from_pydict({"id": [1, 2]})
    ruleset = RuleSet([Rule.not_null("status"), Rule.of_type("total", pa.int64())])
    out = Validator("v", ruleset, ContractMode.QUARANTINE, MetadataColumns()).run(batch)
    assert out.clean is None
    assert out.rejected is not None
    assert out.rejected["reason"].to_pylist() == ["contract", "contract"]


def test_the_sql_timeout_is_a_timedelta_and_its_old_seconds_keyword_warns_and_lands_on_it():
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSource

    flow = Dataflow("validate_sql_timeout")
    source: TestingSource[pa.RecordBatch] = TestingSource([])
    keyed = op.key_on("key", op.input("in", flow, source), lambda _: "orders:0")

    def bound(step: str, **kwargs) -> float | None:
        out = twg.validate(step, keyed, CONTRACT, **kwargs)
        return out.ruleset.session.timeout_seconds

    assert bound("default") == 1.0
    assert bound("new", sql_timeout=timedelta(seconds=2.5)) == 2.5
    assert bound("unbounded", sql_timeout=None) is None
    with pytest.warns(DeprecationWarning, match="`sql_timeout_seconds` is deprecated; pass `sql_t"):
        assert bound("old", sql_timeout_seconds=2.5) == 2.5
    with pytest.raises(ConfigError, match="`sql_timeout` expected a positive datetime.timedelta"):
        bound("number", sql_timeout=2.5)
