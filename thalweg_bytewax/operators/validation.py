"""``validate``: enforce a data contract and quality rules on keyed Arrow batches.

Modes (ADR-0014): ``strict`` stops the flow on the first violating batch, with a message
naming the rule, the column, the offending value and the record's locator;
``quarantine`` diverts violating rows to the DLQ (reason ``contract`` for schema / type /
required failures, ``dq`` for quality rules) and passes the rest; ``annotate`` passes
every row with a ``<prefix>failed_rules`` column. Drop rules discard known junk first
and never reach the DLQ (ADR-0036). Every judged record gets one compact audit row
(ADR-0034).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import bytewax.operators as op
import numpy as np
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream, StatefulLogic
from typing_extensions import override

from thalweg_bytewax._choices import parse_enum
from thalweg_bytewax.contracts.audit import audit_batch
from thalweg_bytewax.contracts.evaluate import drop_masks, evaluate, locator_strings, messages
from thalweg_bytewax.contracts.kernels import duplicate_mask
from thalweg_bytewax.contracts.row_json import rows_as_json
from thalweg_bytewax.contracts.ruleset import (
    DEFAULT_SQL_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_TIMEOUT_SECONDS,
    RuleSet,
)
from thalweg_bytewax.contracts.spec import (
    ContractMode,
    ContractSpec,
    ContractViolationError,
    DropRule,
    Rule,
    RuleKind,
)
from thalweg_bytewax.dedup.key_memory import SeenWindow, key_values
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.observability.gate import observe_step
from thalweg_bytewax.operators._routing import stateful_on_reading_worker
from thalweg_bytewax.records import (
    DEFAULT_COLUMNS,
    DEFAULT_PREFIX,
    MetadataColumns,
    metadata_columns,
)
from thalweg_bytewax.windows.event_time import batch_time

__all__ = ["ValidateOut", "failed_rules_column", "validate"]

logger = logging.getLogger(__name__)

_VERDICTS = pa.array(["pass", "fail"], pa.string())
# DLQ reason by whether a row failed a schema rule.
_REASONS = pa.array([str(RejectReason.DQ), str(RejectReason.CONTRACT)], pa.string())


def failed_rules_column(columns: MetadataColumns = DEFAULT_COLUMNS) -> str:
    """The column ``annotate`` mode adds: ``list<string>`` of failed rule ids."""
    return f"{columns.prefix}failed_rules"


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


@dataclass(frozen=True)
class _Verdict:
    clean: pa.RecordBatch | None
    rejected: pa.RecordBatch | None
    audit: pa.RecordBatch | None


def _row_json(batch: pa.RecordBatch, idx: np.ndarray | None, columns: MetadataColumns) -> pa.Array:
    """The payload of the rows ``idx`` (default all) as JSON objects (see :mod:`.row_json`)."""
    payload = [n for n in batch.schema.names if not columns.is_reserved(n)]
    return rows_as_json(batch.select(payload), idx)


class _Validator:
    def __init__(
        self,
        step_id: str,
        ruleset: RuleSet,
        mode: ContractMode,
        columns: MetadataColumns,
    ) -> None:
        self.step_id = step_id
        self.ruleset = ruleset
        self.mode = mode
        self.columns = columns
        self.windowed = [
            (i, r)
            for i, r in enumerate(ruleset.rules)
            if r.kind is RuleKind.UNIQUE and r.window is not None
        ]
        self._checked: pa.Schema | None = None

    def _check_schema(self, schema: pa.Schema) -> None:
        # Once per distinct batch schema (batches of a stream share one, as a rule).
        checked = self._checked
        if checked is not None and (checked is schema or checked.equals(schema)):
            return
        self.ruleset.check_batch(schema, where=f"validate `{self.step_id}`")
        self._checked = schema

    def run(self, batch: pa.RecordBatch, windows: dict[int, SeenWindow] | None = None) -> _Verdict:
        obs = observe_step("validate", self.step_id, batch)  # None unless observability is on
        verdict = self._run(batch, windows)
        if obs is None:
            return verdict
        clean = obs.finish(verdict.clean, verdict.rejected)
        return _Verdict(clean, verdict.rejected, verdict.audit)

    def _run(self, batch: pa.RecordBatch, windows: dict[int, SeenWindow] | None) -> _Verdict:
        audits: list[pa.RecordBatch] = []
        self._check_schema(batch.schema)
        if self.ruleset.drop and batch.num_rows:
            batch = self._drop(batch, audits)
        if batch.num_rows == 0:
            return _Verdict(None, None, _concat(audits))
        ev = evaluate(batch, self.ruleset)
        if windows is not None:
            # Only rows that pass every other rule are remembered: a row rejected for
            # another reason was not accepted, so its corrected re-send is no duplicate.
            ev = ev.with_masks(self.ruleset, self._window_masks(batch, windows, ~ev.any_failed))
        failed = ev.failed_rules(self.ruleset)
        verdict = _VERDICTS.take(pa.array(ev.any_failed.astype(np.int8)))
        if self.mode is ContractMode.STRICT and ev.any_failed.any():
            raise self._violation(batch, ev)
        audits.append(
            audit_batch(
                batch,
                verdict=verdict,
                failed=failed,
                step_id=self.step_id,
                ruleset_version=self.ruleset.version,
                columns=self.columns,
            )
        )
        audit = _concat(audits)
        if self.mode is ContractMode.ANNOTATE:
            return _Verdict(
                batch.append_column(failed_rules_column(self.columns), failed), None, audit
            )
        if not ev.any_failed.any():
            return _Verdict(batch, None, audit)
        # Rejected rows in batch order, each with its reason: a row that failed a schema
        # rule is a contract reject, any other a quality reject.
        idx = np.flatnonzero(ev.any_failed)
        take = pa.array(idx, pa.int64())
        whole = len(idx) == batch.num_rows
        rows = None if whole else idx
        reasons = _REASONS.take(pa.array(ev.contract_failed[idx].astype(np.int8)))
        rejected = dlq_batch_from_rows(
            batch,
            take,
            reason=reasons,
            step_id=self.step_id,
            messages=messages(batch, ev, self.ruleset, failed, columns=self.columns, rows=rows),
            rules=failed if whole else failed.take(take),
            row_json=_row_json(batch, rows, self.columns),
            columns=self.columns,
        )
        clean = batch.filter(pa.array(~ev.any_failed)) if not ev.any_failed.all() else None
        return _Verdict(clean, rejected, audit)

    def _drop(self, batch: pa.RecordBatch, audits: list[pa.RecordBatch]) -> pa.RecordBatch:
        masks = drop_masks(batch, self.ruleset.drop, ruleset=self.ruleset)
        dropped = np.zeros(batch.num_rows, dtype=bool)
        for rule, mask in zip(self.ruleset.drop, masks, strict=True):
            fresh = mask & ~dropped
            if rule.audit and fresh.any():
                take = pa.array(np.flatnonzero(fresh), pa.int64())
                rows = batch.take(take)
                ids = pa.array([[rule.id]] * len(take), pa.list_(pa.string()))
                audits.append(
                    audit_batch(
                        rows,
                        verdict=pa.array(["drop"] * len(take), pa.string()),
                        failed=ids,
                        step_id=self.step_id,
                        ruleset_version=self.ruleset.version,
                        columns=self.columns,
                    )
                )
            dropped |= mask
        return batch.filter(pa.array(~dropped)) if dropped.any() else batch

    def _window_masks(
        self, batch: pa.RecordBatch, windows: dict[int, SeenWindow], passed: np.ndarray
    ) -> dict[int, np.ndarray]:
        """Rows whose key was accepted within the window, per windowed ``unique`` rule.

        Only rows in ``passed`` (they pass every rule evaluated on the batch alone) are
        looked up and remembered. With several windowed rules, the rules are checked in
        order: a row found in one window is neither looked up nor remembered in the
        windows of the rules after it, but a row found only in a later rule's window has
        already been remembered by the earlier rules' windows.
        """
        out: dict[int, np.ndarray] = {}
        now = batch_time(batch, self.columns.source_timestamp)
        passed = passed.copy()
        for i, rule in self.windowed:
            if any(c not in batch.schema.names for c in rule.columns):
                continue
            candidates = ~duplicate_mask(batch, rule.columns) & passed
            for c in rule.columns:
                col = batch.column(c)
                if col.null_count:
                    candidates &= np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
            rows = np.flatnonzero(candidates)
            hits = windows[i].check_and_add(key_values(batch, rule.columns, rows), now)
            mask = np.zeros(batch.num_rows, dtype=bool)
            mask[rows[hits]] = True
            passed &= ~mask
            out[i] = mask
        return out

    def _violation(self, batch: pa.RecordBatch, ev: Any) -> ContractViolationError:
        row, idx = ev.first_failure()
        rule = self.ruleset.rules[idx]
        # Locate within the whole batch: without locator columns the locator is the
        # row's index in the batch, which a one-row slice would lose.
        locator = locator_strings(batch, self.columns, rows=np.array([row]))[0].as_py()
        column = rule.column
        if column is not None and column in batch.schema.names:
            got = repr(batch.column(column)[row].as_py())
        elif rule.columns:
            got = "a missing column"
        else:
            got = _row_json(batch, np.array([row]), self.columns)[0].as_py()
        n_bad = int(ev.any_failed.sum())
        msg = (
            f"validate `{self.step_id}`: rule `{rule.id}` failed on column "
            f"`{column or ', '.join(rule.columns) or '*'}` at `{locator}`: expected "
            f"{rule.describe()}; got {got} ({n_bad} of {batch.num_rows} rows in the batch "
            "violate the contract). Fix the producer, or run the step in quarantine mode"
        )
        return ContractViolationError(msg, rule.id, column, locator)


def _concat(parts: list[pa.RecordBatch]) -> pa.RecordBatch | None:
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


class _WindowedLogic(StatefulLogic[pa.RecordBatch, _Verdict, tuple[Any, ...]]):
    def __init__(
        self, validator: _Validator, window_rules: Sequence[tuple[int, Rule]], resume: Any
    ) -> None:
        self._validator = validator
        state = dict(resume or ())
        self._windows = {
            i: SeenWindow(rule.window or timedelta(0), state.get(rule.id))
            for i, rule in window_rules
        }
        self._ids = {i: rule.id for i, rule in window_rules}

    @override
    def on_item(self, value: pa.RecordBatch) -> tuple[list[_Verdict], bool]:
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
    sql_timeout_seconds: float | None = DEFAULT_SQL_TIMEOUT_SECONDS,
    sql_memory_limit_bytes: int = DEFAULT_SQL_MEMORY_LIMIT_BYTES,
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
        sql_timeout_seconds: Time bound of each SQL query (rules, metrics, drop rules)
            over one batch; a rule interrupted by it fails every row of the batch (a
            drop rule drops nothing), logged once and counted. ``None``: no bound.
        sql_memory_limit_bytes: Memory limit of the step's DuckDB database (default
            256 MiB, no spill to disk); a rule whose query needs more fails every row of
            the batch, logged once and counted, like one past its time bound.

    Returns:
        ``ValidateOut(clean, rejected, audit, ruleset)``.

    Raises:
        ConfigError: At build time, for an unknown ``mode``.
        ContractError: At build time, for rules on missing columns, SQL that does not
            bind, patterns that do not compile or conflicting rules.
        ContractViolationError: At run time in ``strict`` mode (it stops the flow).
    """
    mode = parse_enum(ContractMode, mode, where=f"validate `{step_id}`", argument="mode")
    ruleset = RuleSet.from_contract(
        contract,
        object_name=object_name,
        rules=rules or (),
        drop=drop or (),
        sql_timeout_seconds=sql_timeout_seconds,
        sql_memory_limit_bytes=sql_memory_limit_bytes,
    )
    columns = metadata_columns(metadata_prefix, f"validate `{step_id}`")
    validator = _Validator(step_id, ruleset, mode, columns)
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
