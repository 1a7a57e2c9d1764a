"""A SQL metric that is NULL (or no row, or NaN) fails its rule; it never raises."""

from __future__ import annotations

import bytewax.operators as op
import pyarrow as pa
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.contracts import MetricOp, Rule, RuleSet, parse_contract
from thalweg_bytewax.contracts.evaluate import evaluate

BATCH = pa.RecordBatch.from_pydict({"x": pa.array([None, None, None], pa.int64())})


@pytest.mark.parametrize("operator", list(MetricOp))
@pytest.mark.parametrize(
    "query",
    [
        "SELECT max(x) FROM batch",  # NULL over an all-NULL column
        "SELECT x FROM batch WHERE false",  # no row at all
        "SELECT 'nan'::DOUBLE",  # NaN compares false both ways
    ],
)
def test_a_null_metric_fails_the_rule_whatever_the_operator(operator, query):
    threshold = (0, 10) if operator in (MetricOp.BETWEEN, MetricOp.NOT_BETWEEN) else 0
    rule = Rule.batch_metric("sql", op=operator, threshold=threshold, expression=query)
    ev = evaluate(BATCH, RuleSet([rule]))
    assert ev.any_failed.tolist() == [True, True, True]


def test_a_null_metric_is_a_dlq_outcome_in_a_flow_not_a_crash():
    contract = parse_contract(
        """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test:null
name: t
version: 1.0.0
schema:
  - name: t
    properties:
      - name: x
        logicalType: integer
    quality:
      - type: sql
        name: max_positive
        query: SELECT max(x) FROM ${table}
        mustBeGreaterThan: 0
""",
        origin="null.yaml",
    )
    flow = Dataflow("null_metric")
    inp = op.input("inp", flow, TestingSource([("t:0", BATCH)]))
    out = twg.validate("validate", inp, contract, mode="quarantine")
    clean: list[object] = []
    rejected: list[tuple[str, pa.RecordBatch]] = []
    op.output("clean", out.clean, TestingSink(clean))
    op.output("rejected", out.rejected, TestingSink(rejected))
    run_main(flow)
    assert clean == []
    assert sum(b.num_rows for _, b in rejected) == 3
    assert {r for _, b in rejected for r in b.column("reason").to_pylist()} == {"dq"}
