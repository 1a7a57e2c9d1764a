"""Private: the judge of one batch of the ``validate`` operator.

:class:`Validator` holds a step's rule set and mode and turns a batch into a
:class:`Verdict`: drop rules first (audited when asked), then every rule evaluated
vectorised (windowed ``unique`` rules against the seen keys the caller keeps), then per
mode the clean rows, the DLQ rows with their reasons and the audit rows, or the
``strict`` mode's violation naming the rule, the column, the value and the locator.
:mod:`thalweg_bytewax.operators.validation` wires it into the dataflow.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from thalweg_bytewax.contracts.audit import audit_batch
from thalweg_bytewax.contracts.evaluate import (
    Evaluation,
    drop_masks,
    evaluate,
    locator_strings,
    messages,
)
from thalweg_bytewax.contracts.kernels import duplicate_mask
from thalweg_bytewax.contracts.row_json import rows_as_json
from thalweg_bytewax.contracts.ruleset import RuleSet
from thalweg_bytewax.contracts.spec import ContractMode, ContractViolationError, Rule, RuleKind
from thalweg_bytewax.dedup.key_memory import SeenWindow, key_values
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.observability.gate import observe_rule_warnings, observe_step
from thalweg_bytewax.records import DEFAULT_COLUMNS, MetadataColumns
from thalweg_bytewax.windows.event_time import batch_time

__all__ = ["Validator", "Verdict", "failed_rules_column"]

logger = logging.getLogger(__name__)

# Audit verdict by 2 * rejected + warned: a row that failed only rules of severity
# warning/info passed, with a warning.
_VERDICTS = pa.array(["pass", "warn", "fail", "fail"], pa.string())
WARNING_LOG_INTERVAL_S = 60.0
"""At most one log line per reporting rule and step this often (with the count since)."""
# DLQ reason by whether a row failed a schema rule.
_REASONS = pa.array([str(RejectReason.DQ), str(RejectReason.CONTRACT)], pa.string())


def failed_rules_column(columns: MetadataColumns = DEFAULT_COLUMNS) -> str:
    """The column ``annotate`` mode adds: ``list<string>`` of failed rule ids."""
    return f"{columns.prefix}failed_rules"


@dataclass(frozen=True)
class Verdict:
    """What one batch became: the rows passed on, the DLQ rows and the audit rows.

    Attributes:
        clean: The rows passed on (``None``: none).
        rejected: The quarantined rows as a DLQ batch (``None``: none).
        audit: One audit row per judged (or audited dropped) record (``None``: none).
    """

    clean: pa.RecordBatch | None
    rejected: pa.RecordBatch | None
    audit: pa.RecordBatch | None


def _row_json(batch: pa.RecordBatch, idx: np.ndarray | None, columns: MetadataColumns) -> pa.Array:
    """The payload of the rows ``idx`` (default all) as JSON objects (see :mod:`.row_json`)."""
    payload = [n for n in batch.schema.names if not columns.is_reserved(n)]
    return rows_as_json(batch.select(payload), idx)


@dataclass(eq=False)
class Validator:
    """Judges batches against one step's rule set in one mode.

    Args:
        step_id: The ``validate`` step, named in messages and audit rows.
        ruleset: The merged, checked rule set.
        mode: ``strict``, ``quarantine`` or ``annotate``.
        columns: The metadata columns of the batches.

    Attributes:
        windowed: The windowed ``unique`` rules, by index in the rule set; their seen
            keys are kept by the caller (Bytewax keyed state) and passed to :meth:`run`.
    """

    step_id: str
    ruleset: RuleSet
    mode: ContractMode
    columns: MetadataColumns
    windowed: list[tuple[int, Rule]] = field(init=False)
    _checked: pa.Schema | None = field(init=False, default=None)
    _warnings: _WarningLog = field(init=False)

    def __post_init__(self) -> None:
        self.windowed = [
            (i, r)
            for i, r in enumerate(self.ruleset.rules)
            if r.kind is RuleKind.UNIQUE and r.window is not None
        ]
        self._warnings = _WarningLog(self.step_id)

    def _check_schema(self, schema: pa.Schema) -> None:
        # Once per distinct batch schema (batches of a stream share one, as a rule).
        checked = self._checked
        if checked is not None and (checked is schema or checked.equals(schema)):
            return
        self.ruleset.check_batch(schema, where=f"validate `{self.step_id}`")
        self._checked = schema

    def run(self, batch: pa.RecordBatch, windows: dict[int, SeenWindow] | None = None) -> Verdict:
        """Judge one batch; ``windows`` holds the seen keys of the windowed rules.

        Raises:
            ContractViolationError: In ``strict`` mode, on the batch's first violation.
        """
        obs = observe_step("validate", self.step_id, batch)  # None unless observability is on
        verdict = self._run(batch, windows)
        if obs is None:
            return verdict
        clean = obs.finish(verdict.clean, verdict.rejected)
        return Verdict(clean, verdict.rejected, verdict.audit)

    def _run(self, batch: pa.RecordBatch, windows: dict[int, SeenWindow] | None) -> Verdict:
        audits: list[pa.RecordBatch] = []
        self._check_schema(batch.schema)
        if self.ruleset.drop and batch.num_rows:
            batch = self._drop(batch, audits)
        if batch.num_rows == 0:
            return Verdict(None, None, _concat(audits))
        ev = evaluate(batch, self.ruleset)
        if windows is not None:
            # Only rows that pass every other rule are remembered: a row rejected for
            # another reason was not accepted, so its corrected re-send is no duplicate.
            ev = ev.with_masks(self.ruleset, self._window_masks(batch, windows, ~ev.any_failed))
        failed = ev.failed_rules(self.ruleset)
        codes = 2 * ev.any_failed.astype(np.int8) + ev.warned.astype(np.int8)
        verdict = _VERDICTS.take(pa.array(codes))
        if self.mode is ContractMode.STRICT and ev.any_failed.any():
            raise self._violation(batch, ev)
        if ev.warned.any():
            self._report_warnings(ev)
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
            return Verdict(
                batch.append_column(failed_rules_column(self.columns), failed), None, audit
            )
        if not ev.any_failed.any():
            return Verdict(batch, None, audit)
        # Rejected rows in batch order, each with its reason: a row that failed a schema
        # rule is a contract reject, any other a quality reject. Their DLQ rows name the
        # rules that rejected them (the audit also lists the reporting rules they failed).
        if ev.warned.any():
            ev = ev.rejecting(self.ruleset)
            failed = ev.failed_rules(self.ruleset)
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
        return Verdict(clean, rejected, audit)

    def _report_warnings(self, ev: Evaluation) -> None:
        """Count the reporting rules' failures in the metrics; log them at a bounded rate."""
        failed = [(self.ruleset.rules[i], n) for i, n in ev.warnings(self.ruleset).items()]
        observe_rule_warnings(self.step_id, {rule.id: n for rule, n in failed})
        self._warnings.add(failed)

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

    def _violation(self, batch: pa.RecordBatch, ev: Evaluation) -> ContractViolationError:
        first = ev.first_failure(self.ruleset)
        assert first is not None  # only called when a row was rejected
        row, idx = first
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


class _WarningLog:
    """Logs failures of reporting rules at WARNING: per rule, at most once an interval.

    The first failure of a rule is logged at once; failures within the next
    :data:`WARNING_LOG_INTERVAL_S` seconds are counted and logged with the next line.
    Never a line per record. Shared by a step's worker threads, hence the lock.
    """

    def __init__(self, step_id: str, interval_s: float = WARNING_LOG_INTERVAL_S) -> None:
        self._step_id = step_id
        self._interval_s = interval_s
        self._lock = threading.Lock()
        # rule id -> (monotonic time of its last line, records failed since, batches since)
        self._pending: dict[str, tuple[float, int, int]] = {}

    def add(self, failed: list[tuple[Rule, int]]) -> None:
        """Add one batch's failures: records failed per reporting rule."""
        now = time.monotonic()
        lines: list[tuple[Rule, int, int]] = []
        with self._lock:
            for rule, n in failed:
                last, n_since, batches = self._pending.get(rule.id, (-math.inf, 0, 0))
                n_since += n
                batches += 1
                if now - last >= self._interval_s:
                    lines.append((rule, n_since, batches))
                    self._pending[rule.id] = (now, 0, 0)
                else:
                    self._pending[rule.id] = (last, n_since, batches)
        for rule, n, batches in lines:
            logger.warning(
                "validate `%s`: %s rule `%s` failed on %d record(s) in %d batch(es) since "
                "its last report (expected %s); the records were passed on, not rejected: "
                "see the audit (verdict `warn`) and thalweg_rule_warnings_total",
                self._step_id,
                rule.severity,
                rule.id,
                n,
                batches,
                rule.describe(),
            )
