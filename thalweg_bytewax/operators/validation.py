"""``validate``: enforce a data contract and quality rules on keyed Arrow batches.

Modes (ADR-0014): ``strict`` stops the flow on the first violating batch, with a message
naming the rule, the column, the offending value and the record's locator;
``quarantine`` diverts violating rows to the DLQ (reason ``contract`` for schema / type /
required failures, ``dq`` for quality rules) and passes the rest; ``annotate`` passes
every row with a ``<prefix>failed_rules`` column. Only rules of severity ``error`` (the
default) make a row violating; a rule of severity ``warning`` or ``info`` rejects
nothing, its failures are reported in the audit (verdict ``warn``), the
``thalweg_rule_warnings_total`` metric and a rate-limited log line. Drop rules discard
known junk first and never reach the DLQ (ADR-0036). Every judged record gets one
compact audit row (ADR-0034).

This module wires the step into the dataflow; the judging of one batch is
:class:`~thalweg_bytewax.operators._validator.Validator`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import bytewax.operators as op
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream, StatefulLogic
from typing_extensions import override

from thalweg_bytewax._choices import parse_enum
from thalweg_bytewax.config import UNSET, Unset, bound_keyword
from thalweg_bytewax.contracts.ruleset import (
    DEFAULT_SQL_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_TIMEOUT_SECONDS,
    RuleSet,
)
from thalweg_bytewax.contracts.spec import ContractMode, ContractSpec, DropRule, Rule
from thalweg_bytewax.dedup.key_memory import SeenWindow
from thalweg_bytewax.operators._routing import stateful_on_reading_worker
from thalweg_bytewax.operators._validator import Validator, Verdict, failed_rules_column
from thalweg_bytewax.records import DEFAULT_PREFIX, metadata_columns

__all__ = ["ValidateOut", "failed_rules_column", "validate"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ValidateOut:
    """The streams of :func:`validate`, all keyed like the input, and its rule set.

    Attributes:
        clean: Rows that passed (quarantine), or every row (annotate, with the failed
            rules column), or every row of passing batches (strict).
        rejected: DLQ batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`) of quarantined rows.
        audit: Compact audit batches (:func:`thalweg_bytewax.contracts.audit_schema`):
            one row per judged (or audited dropped) record.
        ruleset: The rule set the step enforces (merged, checked, versioned). Its
            ``version`` is the ``ruleset_version`` of every audit row; hand it to
            :class:`thalweg_bytewax.connectors.rules.RuleRegistrySink` so the audit
            lane can be resolved to rule definitions.
    """

    clean: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]
    audit: KeyedStream[pa.RecordBatch]
    ruleset: RuleSet


class _WindowedLogic(StatefulLogic[pa.RecordBatch, Verdict, tuple[Any, ...]]):
    def __init__(
        self, validator: Validator, window_rules: Sequence[tuple[int, Rule]], resume: Any
    ) -> None:
        self._validator = validator
        state = dict(resume or ())
        self._windows = {
            i: SeenWindow(rule.window or timedelta(0), state.get(rule.id))
            for i, rule in window_rules
        }
        self._ids = {i: rule.id for i, rule in window_rules}

    @override
    def on_item(self, value: pa.RecordBatch) -> tuple[list[Verdict], bool]:
        return ([self._validator.run(value, self._windows)], StatefulLogic.RETAIN)

    @override
    def snapshot(self) -> tuple[Any, ...]:
        return tuple((self._ids[i], w.snapshot()) for i, w in self._windows.items())


@operator
def validate(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    contract: ContractSpec | None,
    *,
    mode: ContractMode | str = ContractMode.QUARANTINE,
    rules: Sequence[Rule] | None = None,
    drop: Sequence[DropRule] | None = None,
    object_name: str | None = None,
    metadata_prefix: str = DEFAULT_PREFIX,
    sql_timeout: timedelta | None | Unset = UNSET,
    sql_memory_limit_bytes: int = DEFAULT_SQL_MEMORY_LIMIT_BYTES,
    sql_timeout_seconds: float | None | Unset = UNSET,
) -> ValidateOut:
    """Validate keyed Arrow batches against a contract and manual rules.

    Contract rules and manual ``rules`` merge tightest-wins into one versioned rule set,
    :attr:`ValidateOut.ruleset` (the same as :meth:`RuleSet.from_contract` returns for the
    same arguments); write it next to the audit with a
    :class:`~thalweg_bytewax.connectors.rules.RuleRegistrySink` so that every rule
    version can be resolved.
    All rules evaluate vectorised. A ``unique`` rule with a ``window`` keeps the seen
    values in Bytewax keyed state per stream key (under its routing key, on the worker
    that reads the partition: docs/scaling.md), so it survives recovery.

    ```python
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.contracts import DropRule, Rule, load_contract

    contract = load_contract("thalweg_bytewax/flows/contracts/orders.odcs.yaml")
    out = twg.validate(
        "validate", orders, contract, mode="quarantine",
        rules=[Rule.le("total", 100_000)],
        drop=[DropRule.equals("heartbeats", "status", ["HEARTBEAT"])],
    )
    # out.clean -> the table sink; out.rejected -> the DLQ sink; out.audit -> the audit
    # sink, and RuleRegistrySink(lake / "rules", out.ruleset) beside it
    ```

    Args:
        step_id: Unique step id.
        up: Keyed batches (key = source partition) with payload and metadata columns.
        contract: The contract, or ``None`` for manual rules only.
        mode: ``strict``, ``quarantine`` or ``annotate``.
        rules: Manual rules, merged with the contract's (tightest wins).
        drop: Drop rules, applied before validation.
        object_name: The contract's schema object, if it has several.
        metadata_prefix: Prefix of the metadata columns.
        sql_timeout: Time bound of each SQL query (rules, metrics, drop rules) over one
            batch, a ``timedelta`` (default 1 s); a rule interrupted by it fails every
            row of the batch (a drop rule drops nothing), logged once and counted.
            ``None``: no bound.
        sql_memory_limit_bytes: Memory limit of the step's DuckDB database (default
            256 MiB, no spill to disk); a rule whose query needs more fails every row of
            the batch, logged once and counted, like one past its time bound.
        sql_timeout_seconds: Deprecated: ``sql_timeout`` in seconds.

    Returns:
        ``ValidateOut(clean, rejected, audit, ruleset)``.

    Raises:
        ConfigError: At build time, for an unknown ``mode``.
        ContractError: At build time, for rules on missing columns, SQL that does not
            bind, patterns that do not compile or conflicting rules.
        ContractViolationError: At run time in ``strict`` mode (it stops the flow).
    """
    mode = parse_enum(ContractMode, mode, where=f"validate `{step_id}`", argument="mode")
    bound = bound_keyword(
        f"validate `{step_id}`",
        "sql_timeout",
        sql_timeout,
        "sql_timeout_seconds",
        sql_timeout_seconds,
        default=timedelta(seconds=DEFAULT_SQL_TIMEOUT_SECONDS),
    )
    ruleset = RuleSet.from_contract(
        contract,
        object_name=object_name,
        rules=rules or (),
        drop=drop or (),
        sql_timeout=None if bound is None else timedelta(seconds=bound),
        sql_memory_limit_bytes=sql_memory_limit_bytes,
    )
    columns = metadata_columns(metadata_prefix, f"validate `{step_id}`")
    validator = Validator(step_id, ruleset, mode, columns)
    logger.info(
        "validate %s: %d rules, rule set %s, mode %s",
        step_id,
        len(ruleset.rules),
        ruleset.version,
        mode,
    )
    if validator.windowed:
        window_rules = validator.windowed
        verdicts = stateful_on_reading_worker(
            "evaluate", up, lambda resume: _WindowedLogic(validator, window_rules, resume)
        )
    else:
        verdicts = op.map_value("evaluate", up, validator.run)
    return ValidateOut(
        clean=op.filter_map_value("clean", verdicts, lambda v: v.clean),
        rejected=op.filter_map_value("rejected", verdicts, lambda v: v.rejected),
        audit=op.filter_map_value("audit", verdicts, lambda v: v.audit),
        ruleset=ruleset,
    )
