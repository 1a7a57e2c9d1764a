"""RuleRegistrySink: the rule set a validate step enforced, published beside its audit."""

from __future__ import annotations

import os
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource

import thalweg_bytewax.operators as twg
from tests.contracts.orders_data import orders, orders_batch, orders_contract
from tests.fixtures.flows import EntryPoint
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.rules import RuleRegistrySink
from thalweg_bytewax.contracts import (
    DropRule,
    Rule,
    RuleSet,
    explode_audit,
    read_audit,
    read_rule_registry,
)
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

MANUAL = [Rule.le("total", 5_000)]
DROP = [DropRule.equals("heartbeats", "status", ["HEARTBEAT"])]


def _items() -> list[tuple[str, pa.RecordBatch]]:
    contract = orders_contract()
    return [
        (f"orders:{p}", orders_batch(orders(20, seed=p), partition=p, contract=contract))
        for p in (0, 1)
    ]


def _flow(lake: Path, items: list[tuple[str, pa.RecordBatch]]) -> tuple[Dataflow, twg.ValidateOut]:
    flow = Dataflow("registry")
    up = op.input("in", flow, TestingSource(items))
    out = twg.validate("validate", up, orders_contract(), rules=MANUAL, drop=DROP)
    op.output("audit_lane", out.audit, ParquetSink(lake / "audit", shards=2))
    op.output("rule_registry", out.audit, RuleRegistrySink(lake / "rules", out.ruleset))
    op.output("clean", out.clean, TestingSink([]))
    return flow, out


def test_validate_carries_the_rule_set_it_enforces():
    flow = Dataflow("carries")
    up = op.input("in", flow, TestingSource(_items()))
    out = twg.validate("validate", up, orders_contract(), rules=MANUAL, drop=DROP)
    expected = RuleSet.from_contract(orders_contract(), rules=MANUAL, drop=DROP)
    assert isinstance(out.ruleset, RuleSet)
    assert out.ruleset.version == expected.version
    assert [r.id for r in out.ruleset.rules] == [r.id for r in expected.rules]


def test_the_registry_resolves_every_audit_row(tmp_path: Path, entry_point: EntryPoint):
    flow, out = _flow(tmp_path, _items())
    assert not (tmp_path / "rules").exists()  # building the flow writes nothing
    entry_point(flow)
    files = sorted(p.name for p in (tmp_path / "rules").iterdir())
    assert files == [f"{out.ruleset.version}.parquet"]  # no staging file left behind
    registry = read_rule_registry(tmp_path / "rules")
    assert registry.equals(out.ruleset.manifest())
    audit = read_audit(tmp_path / "audit")
    assert set(audit["ruleset_version"].to_pylist()) == {out.ruleset.version}
    per_rule = explode_audit(audit, registry)
    assert per_rule.num_rows == audit.num_rows * len(out.ruleset.rules)


def test_an_existing_registry_file_is_kept(tmp_path: Path, entry_point: EntryPoint):
    flow, out = _flow(tmp_path, _items())
    entry_point(flow)
    path = tmp_path / "rules" / f"{out.ruleset.version}.parquet"
    before = os.stat(path)
    flow, _ = _flow(tmp_path, _items())  # a restart, or another worker
    entry_point(flow)
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_no_items_no_file(tmp_path: Path):
    from bytewax.testing import run_main

    flow, _ = _flow(tmp_path, [])
    run_main(flow)
    assert not (tmp_path / "rules").exists()


def test_the_sink_takes_a_rule_set_and_fails_loudly_when_it_cannot_write(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"rule registry sink `.*`: expected a RuleSet"):
        RuleRegistrySink(tmp_path, [Rule.not_null("id")])  # type: ignore[arg-type]
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    sink = RuleRegistrySink(blocker / "rules", RuleSet(MANUAL))
    part = sink.build("rule_registry", 0, 1)
    with pytest.raises(SinkTerminalError, match=r"rule registry sink `.*rules`: cannot write"):
        part.write_batch([("orders:0", None)])
