"""Contract SQL: one expression (or one SELECT), isolated per rule set, bounded in time, memory."""

from __future__ import annotations

import time
from datetime import timedelta

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.contracts import (
    DEFAULT_SQL_TIMEOUT,
    ContractError,
    DropRule,
    Rule,
    RuleSet,
    parse_contract,
)
from thalweg_bytewax.contracts.evaluate import evaluate

HEAD = """\
apiVersion: v3.0.2
kind: DataContract
id: urn:test:{name}
name: {name}
version: 1.0.0
schema:
  - name: t
    properties:
      - name: code
        logicalType: string
        logicalTypeOptions: {{minLength: 3, maxLength: 3}}
      - name: n
        logicalType: integer
"""

VICTIM = HEAD.format(name="victim") + (
    "    quality:\n"
    "      - type: custom\n"
    "        engine: duckdb\n"
    "        name: upper_code\n"
    '        implementation: "upper(code) = code"\n'
    "      - type: custom\n"
    "        engine: duckdb\n"
    "        name: short_code\n"
    '        implementation: "length(code) <= 3"\n'
)

# Row 1 breaks the length rules, row 2 the type check of `n`, row 3 upper case.
BATCH = pa.RecordBatch.from_pydict(
    {"code": ["ABC", "ABCDE", "ABD", "abc"], "n": ["1", "2", "x", "4"]}
)


def _verdicts(ruleset: RuleSet) -> list[tuple[str, ...]]:
    ev = evaluate(BATCH, ruleset)
    return [tuple(r) for r in ev.failed_rules(ruleset).to_pylist()]


def _attacker(rule_sql: str, *, metric: bool = False) -> str:
    if metric:
        return HEAD.format(name="attacker") + (
            "    quality:\n"
            "      - type: sql\n"
            "        name: sneaky\n"
            f"        query: {rule_sql!r}\n"
            "        mustBeGreaterThan: -1\n"
        ).replace("'", "'")
    return HEAD.format(name="attacker") + (
        "    quality:\n"
        "      - type: custom\n"
        "        engine: duckdb\n"
        "        name: sneaky\n"
        f"        implementation: {_yaml_str(rule_sql)}\n"
    )


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


MACRO = "CREATE OR REPLACE MACRO length(x) AS 0"


def test_a_rule_with_statements_is_refused_and_cannot_switch_off_another_contract():
    victim = RuleSet.from_contract(parse_contract(VICTIM, origin="victim.yaml"))
    before = _verdicts(victim)
    assert [len(v) for v in before] == [0, 2, 1, 1]
    with pytest.raises(ContractError, match="one SQL expression"):
        parse_contract(
            _attacker(f"code IS NOT NULL) AS ok FROM batch; {MACRO}; SELECT (1"), origin="a.yaml"
        )
    with pytest.raises(ContractError, match="one SELECT statement"):
        parse_contract(
            _attacker(f"SELECT count(*) FROM ${{table}}; {MACRO}", metric=True), origin="a.yaml"
        )
    assert _verdicts(victim) == before


def test_manual_rules_and_drop_rules_are_one_expression_too():
    with pytest.raises(ContractError, match="one SQL expression"):
        RuleSet([Rule.sql("r", f"1=1; {MACRO}; SELECT (1")])
    with pytest.raises(ContractError, match="one SQL expression"):
        RuleSet([], [DropRule.sql("d", f"false; {MACRO}; SELECT (false")])
    with pytest.raises(ContractError, match="one SELECT statement"):
        RuleSet([Rule.batch_metric("sql", op="mustBe", threshold=0, expression=f"{MACRO}")])


def test_a_trailing_comment_cannot_swallow_the_query_around_a_predicate():
    rs = RuleSet([Rule.sql("c", "code = upper(code) -- a comment")])
    assert [bool(v) for v in _verdicts(rs)] == [False, False, False, True]


def test_a_row_predicate_that_aggregates_is_refused_at_load():
    contract = HEAD.format(name="agg") + (
        "    quality:\n      - type: custom\n        engine: duckdb\n        name: agg\n"
        '        implementation: "count(*) > 0"\n'
    )
    with pytest.raises(ContractError, match="one value per row"):
        parse_contract(contract, origin="agg.yaml")


def test_rule_sets_do_not_share_a_connection():
    a = RuleSet([Rule.sql("r", "code IS NOT NULL")])
    b = RuleSet([Rule.sql("r", "code IS NOT NULL")])
    assert a.session.cursor() is not b.session.cursor()
    a.session.cursor().execute(f"{MACRO}")  # even state planted by hand stays in `a`
    assert _verdicts(b) == [(), (), (), ()]
    assert evaluate(BATCH, RuleSet([Rule.length("code", 3, 3)])).any_failed.tolist() == [
        False,
        True,
        False,
        False,
    ]


SLOW = "(SELECT count(*) FROM range(20000000000) t(i) WHERE i % 7 = 3) > 0"


def test_a_slow_rule_is_interrupted_and_fails_its_rows_loudly(caplog):
    rs = RuleSet(
        [Rule.sql("slow", SLOW), Rule.sql("fast", "code IS NOT NULL")],
        sql_timeout=timedelta(seconds=0.2),
    )
    with caplog.at_level("WARNING"):
        ev = evaluate(BATCH.slice(0, 2), rs)
    slow_id = rs.rules[0].id
    # Run to its end, the rule would pass (the count is > 0): its rows fail because the
    # time bound interrupted it, which the warning names.
    assert [list(r) for r in ev.failed_rules(rs).to_pylist()] == [[slow_id], [slow_id]]
    assert rs.sql_failures == {slow_id: 1}
    assert f"rule {slow_id} failed every row of a batch: its SQL ran past 0.2 s" in caplog.text


def test_a_slow_metric_fails_the_batch_and_a_slow_drop_rule_drops_nothing(caplog):
    metric = Rule.batch_metric(
        "sql", op="mustBeGreaterThan", threshold=0, expression=f"SELECT ({SLOW})::INT", name="m"
    )
    rs = RuleSet([metric], [DropRule.sql("d", SLOW)], sql_timeout=timedelta(seconds=0.2))
    from thalweg_bytewax.contracts.evaluate import drop_masks

    with caplog.at_level("WARNING"):
        ev = evaluate(BATCH, rs)
        dropped = drop_masks(BATCH, rs.drop, ruleset=rs)
    # Run to their end, the metric would pass and the drop rule drop every row: both
    # were interrupted by the time bound.
    assert ev.any_failed.tolist() == [True] * 4
    assert dropped[0].tolist() == [False] * 4
    assert set(rs.sql_failures) == {metric.id, rs.drop[0].id}
    for rule_id in (metric.id, rs.drop[0].id):
        assert f"rule {rule_id} failed every row of a batch: its SQL ran past 0.2 s" in caplog.text


def test_the_time_bound_is_validated():
    with pytest.raises(ContractError, match="`sql_timeout` expected a positive"):
        RuleSet([], sql_timeout=timedelta(0))
    with pytest.raises(ContractError, match="`sql_timeout` expected a positive"):
        RuleSet([], sql_timeout=5)  # type: ignore[arg-type]  # seconds, not a timedelta


def test_the_old_seconds_keyword_warns_and_lands_on_sql_timeout():
    with pytest.warns(DeprecationWarning, match="`sql_timeout_seconds` is deprecated; pass `sql_t"):
        rs = RuleSet([], sql_timeout_seconds=2.5)
    assert rs.session.timeout_seconds == 2.5
    with pytest.warns(DeprecationWarning, match="`sql_timeout_seconds` is deprecated"):
        merged = RuleSet.from_contract(None, sql_timeout_seconds=None)
    assert merged.session.timeout_seconds is None
    assert RuleSet([], sql_timeout=timedelta(seconds=2.5)).session.timeout_seconds == 2.5
    assert RuleSet([]).session.timeout_seconds == DEFAULT_SQL_TIMEOUT.total_seconds() == 1
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ContractError, match="sql_timeout_seconds` expected a positive"),
    ):
        RuleSet([], sql_timeout_seconds=0)
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ContractError, match="got `sql_timeout` and its old name"),
    ):
        RuleSet([], sql_timeout=timedelta(seconds=1), sql_timeout_seconds=1)


# --- property: whatever a contract's SQL says, it cannot change another's verdicts -----

_DDL = st.sampled_from(
    [
        MACRO,
        "CREATE OR REPLACE MACRO upper(x) AS x",
        "CREATE TABLE batch AS SELECT 1 AS code",
        "CREATE VIEW v AS SELECT 1",
        "CREATE TYPE mood AS ENUM ('a')",
        "CREATE SEQUENCE s",
        "SET VARIABLE x = 1",
        "ATTACH ':memory:' AS other",
        "USE other",
        "DETACH other",
        "PRAGMA disable_optimizer",
        "SET threads = 1",
        "RESET ALL",
        "DROP MACRO length",
        "CHECKPOINT",
        "INSTALL httpfs",
        "LOAD json",
        "CALL pragma_version()",
        "BEGIN TRANSACTION",
        "ROLLBACK",
    ]
)


def _victim() -> tuple[RuleSet, list[tuple[str, ...]]]:
    victim = RuleSet.from_contract(parse_contract(VICTIM, origin="victim.yaml"))
    return victim, _verdicts(victim)


# Loaded once: every example below must leave its verdicts exactly as they were.
_VICTIM = _victim()
_EXPR = st.sampled_from(
    ["code IS NOT NULL", "1) AS ok FROM batch", "length(code) = 3", "(1", "true)", "n"]
)


@given(head=_EXPR, ddl=st.lists(_DDL, min_size=1, max_size=3), tail=_EXPR, metric=st.booleans())
def test_property_statements_are_refused_and_never_reach_another_contract(
    head: str, ddl: list[str], tail: str, metric: bool
) -> None:
    victim, before = _VICTIM
    body = "; ".join([head, *ddl, f"SELECT ({tail}"])
    if metric:
        body = "; ".join([f"SELECT count(*) FROM batch WHERE {head}", *ddl])
    with pytest.raises(ContractError):
        RuleSet.from_contract(parse_contract(_attacker(body, metric=metric), origin="a.yaml"))
    for statement in ddl:  # each statement alone, too
        with pytest.raises(ContractError):
            RuleSet.from_contract(
                parse_contract(_attacker(statement, metric=metric), origin="a.yaml")
            )
    assert _verdicts(victim) == before


@given(text=st.text(alphabet=st.sampled_from(list("abcn ();'=*1_-\n")), max_size=40))
def test_property_any_rule_text_loads_cleanly_or_is_refused(text: str) -> None:
    victim, before = _VICTIM
    try:
        attacker = RuleSet.from_contract(parse_contract(_attacker(text), origin="a.yaml"))
    except ContractError:
        pass
    else:
        evaluate(BATCH, attacker)  # an outcome, never an exception
    assert _verdicts(victim) == before


def test_the_time_bound_leaves_no_thread_behind():
    import threading

    def watchdogs() -> int:
        return sum(t.name == "thalweg-sql-watchdog" for t in threading.enumerate())

    rs = RuleSet([Rule.sql("fast", "code IS NOT NULL")], sql_timeout=timedelta(seconds=5))
    for _ in range(2):  # the guard ends, and the next query starts one again
        evaluate(BATCH, rs)
        deadline = time.monotonic() + 5
        while watchdogs() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watchdogs() == 0  # the guard ends with the last query, not at its deadline
    slow = RuleSet([Rule.sql("slow", SLOW)], sql_timeout=timedelta(seconds=0.2))
    assert evaluate(BATCH.slice(0, 2), slow).any_failed.tolist() == [True, True]


# Eight million distinct values: a few hundred MiB of hash table in well under a second.
GREEDY_METRIC = "SELECT count(DISTINCT i) FROM range(8000000) t(i)"


def test_a_rule_past_the_memory_limit_fails_its_rows_with_the_reason(caplog):
    metric = Rule.batch_metric(
        "sql", op="mustBeGreaterThan", threshold=0, expression=GREEDY_METRIC, name="greedy"
    )
    rs = RuleSet(
        [metric, Rule.sql("fine", "code IS NOT NULL")],
        sql_timeout=None,
        sql_memory_limit_bytes=32 * 1024 * 1024,
    )
    with caplog.at_level("WARNING"):
        ev = evaluate(BATCH, rs)
    assert ev.any_failed.tolist() == [True] * 4
    assert [list(r) for r in ev.failed_rules(rs).to_pylist()] == [[metric.id]] * 4
    assert rs.sql_failures == {metric.id: 1}
    assert "ran past the memory limit of 32 MiB (raise `sql_memory_limit_bytes`" in caplog.text
    assert "Out of Memory Error" in caplog.text
    # The rule set's database lives on: the next batch is judged again, and counted.
    assert evaluate(BATCH, rs).any_failed.tolist() == [True] * 4
    assert rs.sql_failures == {metric.id: 2}


def test_the_memory_limit_is_validated_and_defaults_to_256_mib():
    with pytest.raises(ContractError, match=r"^rule set: expected `sql_memory_limit_bytes`"):
        RuleSet([], sql_memory_limit_bytes=1024)
    session = RuleSet([Rule.sql("fine", "code IS NOT NULL")]).session
    assert session.memory_limit_bytes == 256 * 1024 * 1024
    ((limit, temp),) = (
        session.cursor()
        .execute("SELECT current_setting('memory_limit'), current_setting('temp_directory')")
        .fetchall()
    )
    assert (limit, temp) == ("256.0 MiB", "")
