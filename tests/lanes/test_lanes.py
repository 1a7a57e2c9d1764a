"""validate's clean, DLQ and audit streams written by ParquetSink and read back.

Every input record is in the clean lane or the DLQ or was dropped (and counted); the
audit lane has one row per judged record with the rule-set version, and with the rule
registry it answers every (record, rule) verdict.
"""

from __future__ import annotations

from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from tests.contracts.orders_data import COLS, orders, orders_batch, orders_contract
from tests.fixtures.flows import EntryPoint
from tests.helpers import located, locator_of
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.contracts import (
    DropRule,
    RuleSet,
    audit_schema,
    explode_audit,
    read_audit,
    read_rule_registry,
)
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.lanes.dlq import dlq_schema, read_dlq, rejected_from_dlq_batch

PER_BATCH = 40
BATCHES = 3  # per partition


def inputs() -> tuple[list[tuple[str, pa.RecordBatch]], dict, set]:
    """Two partitions of orders, a few bad (value, required) and a few heartbeats."""
    contract = orders_contract()
    items, bad, heartbeats = [], {}, set()
    for p in (0, 1):
        for b in range(BATCHES):
            first = b * PER_BATCH
            rows = orders(PER_BATCH, seed=100 * p + b)
            for i, row in enumerate(rows):
                offset = first + i
                if offset % 17 == 3:
                    row["status"] = "LOST"
                    bad[(p, offset)] = ("dq", "status_allowed_values")
                elif offset % 23 == 5:
                    row["total"] = None
                    bad[(p, offset)] = ("contract", "total_not_null")
                elif offset % 29 == 11:
                    row["status"] = "HEARTBEAT"
                    heartbeats.add((p, offset))
            batch = orders_batch(rows, partition=p, first_offset=first, contract=contract)
            items.append((f"orders:{p}", batch))
    return items, bad, heartbeats


DROP = [DropRule.equals("heartbeats", "status", ["HEARTBEAT"])]


def run_lanes(lake: Path, *, drop: list[DropRule], entry_point: EntryPoint = run_main) -> RuleSet:
    contract = orders_contract()
    items, _, _ = inputs()
    flow = Dataflow("lanes")
    up = op.input("in", flow, TestingSource(items))
    out = twg.validate("validate", up, contract, mode="quarantine", drop=drop)
    op.output("clean", out.clean, ParquetSink(lake / "orders", shards=2))
    op.output("dlq", out.rejected, ParquetSink(lake / "dlq", shards=2))
    op.output("audit", out.audit, ParquetSink(lake / "audit", shards=2))
    entry_point(flow)
    ruleset = RuleSet.from_contract(contract, drop=drop)
    (lake / "rules").mkdir()
    pq.write_table(ruleset.manifest(), lake / "rules" / f"{ruleset.version}.parquet")
    return ruleset


def test_every_record_is_clean_rejected_or_dropped_and_audited(
    tmp_path: Path, entry_point: EntryPoint
) -> None:
    # With two workers the two sink shards of each lane are written by different workers.
    _, bad, heartbeats = inputs()
    assert len(bad) > 10 and len(heartbeats) > 3
    ruleset = run_lanes(tmp_path, drop=DROP, entry_point=entry_point)
    everything = {(p, o) for p in (0, 1) for o in range(BATCHES * PER_BATCH)}

    clean = located(read_lane(tmp_path / "orders"))
    dlq = read_dlq(tmp_path / "dlq")
    rejected = located(dlq)
    assert len(clean) == len(set(clean)) and len(rejected) == len(set(rejected))
    assert set(rejected) == set(bad)
    assert set(clean) == everything - set(bad) - heartbeats
    assert not set(clean) & set(rejected)
    # The DLQ rows name their reason and rule and carry the decoded row.
    for loc, reason, rules, row in zip(
        rejected,
        dlq["reason"].to_pylist(),
        dlq["rules"].to_pylist(),
        dlq["row_json"].to_pylist(),
        strict=True,
    ):
        assert reason == bad[loc][0]
        assert [r.split("@")[0] for r in rules] == [bad[loc][1]]
        assert '"order_id"' in row
    assert dlq.schema.remove(dlq.schema.get_field_index(COLS.emit_ts)).names == (dlq_schema().names)

    # Audit: one row per judged record (dropped heartbeats are silent by default).
    audit = read_audit(tmp_path / "audit")
    audited = located(audit)
    assert len(audited) == len(set(audited))
    assert set(audited) == everything - heartbeats
    assert set(audit["ruleset_version"].to_pylist()) == {ruleset.version}
    verdicts = dict(zip(audited, audit["verdict"].to_pylist(), strict=True))
    assert {loc for loc, v in verdicts.items() if v == "fail"} == set(bad)
    assert read_audit(tmp_path / "audit", verdict="fail").num_rows == len(bad)
    assert read_audit(tmp_path / "audit", ruleset_version="other").num_rows == 0


def test_audit_lane_answers_every_rule_verdict_with_its_version(tmp_path: Path) -> None:
    _, bad, heartbeats = inputs()
    ruleset = run_lanes(tmp_path, drop=DROP)
    registry = read_rule_registry(tmp_path / "rules")
    per_rule = explode_audit(read_audit(tmp_path / "audit"), registry)
    n_rules = len(ruleset.manifest())
    assert per_rule.num_rows == (2 * BATCHES * PER_BATCH - len(heartbeats)) * n_rules
    versions = dict(zip(registry["name"].to_pylist(), registry["version"].to_pylist(), strict=True))
    for row in per_rule.to_pylist():
        loc = (row[COLS.source_partition], row[COLS.source_offset])
        assert row["rule_version"] == versions[row["rule"]]
        failing = bad.get(loc, (None, None))[1]
        assert row["rule_verdict"] == ("fail" if row["rule"] == failing else "pass"), (loc, row)


def test_read_dlq_filters_by_reason_and_round_trips_to_rejected(tmp_path: Path) -> None:
    _, bad, _ = inputs()
    run_lanes(tmp_path, drop=DROP)
    dq = read_dlq(tmp_path / "dlq", reason="dq")
    assert set(located(dq)) == {loc for loc, (r, _) in bad.items() if r == "dq"}
    both = read_dlq(tmp_path / "dlq", reason=["dq", "contract"])
    assert both.num_rows == len(bad)
    assert read_dlq(tmp_path / "dlq", reason="decode").num_rows == 0
    with pytest.raises(ValueError, match="nonsense"):
        read_dlq(tmp_path / "dlq", reason="nonsense")
    rejected = rejected_from_dlq_batch(dq.combine_chunks().to_batches()[0])
    assert {(locator_of(r).partition, locator_of(r).offset) for r in rejected} == set(located(dq))
    assert all(locator_of(r).topic == "orders" and r.record_id for r in rejected)


def test_audited_drops_land_in_the_audit_lane_never_in_the_dlq(tmp_path: Path) -> None:
    _, bad, heartbeats = inputs()
    drop = [DropRule.equals("heartbeats", "status", ["HEARTBEAT"], audit=True)]
    run_lanes(tmp_path, drop=drop)
    dropped = read_audit(tmp_path / "audit", verdict="drop")
    assert set(located(dropped)) == heartbeats
    assert {tuple(r) for r in dropped["failed_rules"].to_pylist()} == {(drop[0].id,)}
    assert not set(located(read_dlq(tmp_path / "dlq"))) & heartbeats


def test_empty_lanes_read_back_as_empty_tables(tmp_path: Path) -> None:
    (tmp_path / "dlq").mkdir()
    (tmp_path / "audit").mkdir()
    assert read_dlq(tmp_path / "dlq", reason="dq").schema == dlq_schema()
    assert read_audit(tmp_path / "audit").num_rows == 0
    assert read_audit(tmp_path / "audit").schema == audit_schema()
