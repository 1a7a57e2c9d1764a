"""Vectorised rule evaluation: an Arrow batch and a rule set to an :class:`Evaluation`.

Every rule evaluates to one boolean "failed" mask per batch (:mod:`.kernels`); per-row
results (the list of failed rule ids, DLQ messages) are assembled from the masks with
numpy and Arrow kernels, never with a Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.contracts.kernels import (
    failed_mask,
    metric_rule_mask,
    predicate_masks,
    row_rule_mask,
    sql_masks,
    type_check,
)
from thalweg_bytewax.contracts.row_json import concat_text
from thalweg_bytewax.contracts.ruleset import RuleSet
from thalweg_bytewax.contracts.spec import ContractError, DropRule, Rule, RuleKind
from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.sql.syntax import predicate_sql

__all__ = ["Evaluation", "drop_masks", "evaluate", "locator_strings", "messages"]

_DEFAULT_COLUMNS = MetadataColumns()
# messages() names each row's set of failed rules by a bit set of up to 62 rules; sets of
# up to 16 rules are told apart through a table rather than a sort.
_MAX_SET_BITS = 62
_TABLE_BITS = 16


@dataclass(frozen=True)
class Evaluation:
    """The verdicts of one batch.

    Attributes:
        num_rows: Rows evaluated.
        rule_index: Indices (into the rule set) of the rules that failed somewhere.
        masks: One failed-mask per entry of ``rule_index`` (numpy bool, length rows).
        any_failed: Rows that failed at least one rule that rejects (severity ``error``).
        contract_failed: Rows that failed a schema rule that rejects (DLQ reason
            ``contract``).
        warned: Rows that failed at least one rule of severity ``warning`` or ``info``
            (reported, never rejected); a row may be in both.
    """

    num_rows: int
    rule_index: tuple[int, ...]
    masks: tuple[np.ndarray, ...]
    any_failed: np.ndarray
    contract_failed: np.ndarray
    warned: np.ndarray

    def failed_rules(self, ruleset: RuleSet) -> pa.ListArray:
        """``list<string>`` per row: the ids of the rules each row failed, in rule order."""
        n = self.num_rows
        if not self.masks:
            return pa.ListArray.from_arrays(
                pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string())
            )
        m = np.stack(self.masks)  # rules x rows
        rows, which = np.nonzero(m.T)  # row-major: grouped by row, rule order inside
        counts = np.bincount(rows, minlength=n)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        ids = ruleset.ids.take(pa.array(np.asarray(self.rule_index, np.int64)[which]))
        return pa.ListArray.from_arrays(pa.array(offsets), ids)

    def with_masks(self, ruleset: RuleSet, extra: Mapping[int, np.ndarray]) -> Evaluation:
        """This evaluation with further failed masks (by rule index) OR-ed in."""
        return _assemble(
            self.num_rows, ruleset, dict(zip(self.rule_index, self.masks, strict=True)), extra
        )

    def rejecting(self, ruleset: RuleSet) -> Evaluation:
        """This evaluation restricted to the rules that reject (severity ``error``)."""
        keep = [k for k, i in enumerate(self.rule_index) if ruleset.rules[i].severity.rejects]
        if len(keep) == len(self.rule_index):
            return self
        return Evaluation(
            self.num_rows,
            tuple(self.rule_index[k] for k in keep),
            tuple(self.masks[k] for k in keep),
            self.any_failed,
            self.contract_failed,
            np.zeros(self.num_rows, dtype=bool),
        )

    def warnings(self, ruleset: RuleSet) -> dict[int, int]:
        """Rows failed per rule that only reports (``warning``/``info``), by rule index."""
        return {
            i: int(mask.sum())
            for i, mask in zip(self.rule_index, self.masks, strict=True)
            if not ruleset.rules[i].severity.rejects
        }

    def first_failure(self, ruleset: RuleSet) -> tuple[int, int] | None:
        """``(row, rule index)`` of the first rejected row and its first rejecting rule."""
        if not self.any_failed.any():
            return None
        row = int(np.argmax(self.any_failed))
        for idx, mask in zip(self.rule_index, self.masks, strict=True):
            if mask[row] and ruleset.rules[idx].severity.rejects:
                return row, idx
        return None  # pragma: no cover - any_failed implies a mask


def evaluate(
    batch: pa.RecordBatch,
    ruleset: RuleSet,
    *,
    extra: Mapping[int, np.ndarray] | None = None,
) -> Evaluation:
    """Evaluate every rule of ``ruleset`` over ``batch``, columnar.

    Args:
        batch: The records.
        ruleset: The rules.
        extra: Additional failed masks by rule index, OR-ed in (the operator passes
            cross-batch uniqueness here).

    Returns:
        The per-rule failed masks and their unions.

    Raises:
        ContractError: When the batch lacks a column a rule needs (see
            :meth:`RuleSet.check_batch`).
    """
    n = batch.num_rows
    ruleset.check_batch(batch.schema, where="evaluate")
    found: dict[int, np.ndarray] = {}
    sql_rules: list[tuple[int, Rule]] = []
    type_rules: list[tuple[int, Rule]] = []
    for i, rule in enumerate(ruleset.rules):
        if rule.kind is RuleKind.SQL:
            sql_rules.append((i, rule))
            continue
        if rule.kind is RuleKind.TYPE:
            mask, needs_sql = type_check(rule, batch, n)
            if needs_sql:
                type_rules.append((i, rule))
        elif rule.kind is RuleKind.METRIC:
            mask = metric_rule_mask(rule, batch, n, ruleset)
        else:
            mask = row_rule_mask(rule, batch, n)
        if mask is not None and mask.any():
            found[i] = mask
    if n and (sql_rules or type_rules):
        for i, mask in sql_masks(batch, sql_rules, type_rules, ruleset).items():
            if mask.any():
                found[i] = mask
    return _assemble(n, ruleset, found, extra)


def _assemble(
    n: int,
    ruleset: RuleSet,
    found: Mapping[int, np.ndarray],
    extra: Mapping[int, np.ndarray] | None,
) -> Evaluation:
    found = dict(found)
    for i, mask in (extra or {}).items():
        if mask.any():
            found[i] = found[i] | mask if i in found else mask
    order = tuple(sorted(found))
    masks = tuple(found[i] for i in order)
    any_failed = np.zeros(n, dtype=bool)
    contract_failed = np.zeros(n, dtype=bool)
    warned = np.zeros(n, dtype=bool)
    for i, mask in zip(order, masks, strict=True):
        rule = ruleset.rules[i]
        if not rule.severity.rejects:
            warned |= mask
            continue
        any_failed |= mask
        if rule.reason == "contract":
            contract_failed |= mask
    return Evaluation(n, order, masks, any_failed, contract_failed, warned)


def drop_masks(
    batch: pa.RecordBatch, drop: Sequence[DropRule], *, ruleset: RuleSet | None = None
) -> list[np.ndarray]:
    """One matched mask per drop rule (rows to discard).

    SQL drop rules run on ``ruleset``'s session (a fresh rule set of ``drop`` when
    omitted). A drop rule whose SQL errs or runs past the bound drops nothing: the rows
    go on to validation, so nothing is discarded unjudged.
    """
    n = batch.num_rows
    out: list[np.ndarray] = []
    sql_rules = [(i, d) for i, d in enumerate(drop) if d.expression is not None]
    sql: dict[int, np.ndarray] = {}
    if sql_rules and n:
        owner = ruleset if ruleset is not None else RuleSet((), drop)
        items = [
            (i, f"coalesce({predicate_sql(str(d.expression))}, false)", d.id) for i, d in sql_rules
        ]
        for i, mask in predicate_masks(batch, items, owner).items():
            sql[i] = np.zeros(n, dtype=bool) if mask is None else mask
    for i, d in enumerate(drop):
        if d.expression is not None:
            out.append(sql.get(i, np.zeros(n, dtype=bool)))
        elif d.column not in batch.schema.names:
            msg = (
                f"drop rule `{d.id}` is on column {d.column!r}, which the batch lacks; "
                f"expected one of {sorted(batch.schema.names)!r}"
            )
            raise ContractError(msg)
        else:
            col = batch.column(str(d.column))
            try:
                value_set = pa.array(list(d.values or ()), type=col.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                col = col.cast(pa.string())
                value_set = pa.array([str(v) for v in d.values or ()])
            out.append(failed_mask(pc.is_in(col, value_set=value_set)))
    return out


def locator_strings(
    batch: pa.RecordBatch,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
    *,
    rows: np.ndarray | None = None,
) -> pa.Array:
    """``topic:partition@offset`` per row, or ``row <i>`` where the batch has no locator.

    Args:
        batch: The records.
        columns: Metadata column names (the prefix).
        rows: Only these rows (indices into ``batch``, in this order); default all.
    """
    names = batch.schema.names
    take = None if rows is None else pa.array(rows, pa.int64())

    def text(name: str) -> pa.Array:
        col = batch.column(name)
        return (col if take is None else col.take(take)).cast(pa.string())

    if all(
        c in names for c in (columns.source_topic, columns.source_partition, columns.source_offset)
    ):
        return pc.binary_join_element_wise(
            text(columns.source_topic),
            pc.binary_join_element_wise(
                text(columns.source_partition), text(columns.source_offset), "@"
            ),
            ":",
        )
    index = np.arange(batch.num_rows) if rows is None else np.asarray(rows, np.int64)
    return pc.binary_join_element_wise(
        pa.scalar("row", pa.string()), pa.array(index, pa.int64()).cast(pa.string()), " "
    )


def messages(
    batch: pa.RecordBatch,
    evaluation: Evaluation,
    ruleset: RuleSet,
    failed: pa.ListArray,
    *,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
    rows: np.ndarray | None = None,
) -> pa.Array:
    """A human message per row: locator, the first failed rule in words, all failed ids.

    ``topic:partition@offset: expected <first failed rule>; failed rules: <ids>``. The
    text after the locator depends only on which rules a row failed: it is written once
    per distinct set of failed rules and joined to the locators in one pass (the native
    writer's :func:`~.row_json.concat_text`, else one Arrow kernel call).

    Args:
        batch: The records.
        evaluation: Their verdicts.
        ruleset: The rules judged.
        failed: The failed rule ids per row of ``batch`` (:meth:`Evaluation.failed_rules`).
        columns: Metadata column names (the prefix).
        rows: Only these rows (indices into ``batch``, in this order); default all. Built
            column-wise over just these rows.
    """
    k = len(evaluation.masks)
    if not 0 < k <= _MAX_SET_BITS:
        return _messages_from_lists(batch, evaluation, ruleset, failed, columns, rows)
    pick = None if rows is None or _is_identity(rows, batch.num_rows) else np.asarray(rows)
    # Each row's set of failed rules as a bit set over evaluation.rule_index.
    codes = np.zeros(batch.num_rows if pick is None else len(pick), np.int64)
    for bit, mask in enumerate(evaluation.masks):
        codes |= (mask if pick is None else mask[pick]).astype(np.int64) << bit
    if k <= _TABLE_BITS:
        seen = np.zeros(1 << k, dtype=bool)
        seen[codes] = True
        sets = np.flatnonzero(seen)
        slot = np.zeros(1 << k, dtype=np.int64)
        slot[sets] = np.arange(len(sets))
        which = slot[codes]
    else:
        sets, which = np.unique(codes, return_inverse=True)
    ids = ruleset.ids.to_pylist()
    words = ruleset.descriptions.to_pylist()
    tails = []
    for code in sets.tolist():
        hit = [evaluation.rule_index[b] for b in range(k) if code >> b & 1]
        first = words[hit[0] if hit else 0]
        tails.append(f": expected {first}; failed rules: {', '.join(ids[i] for i in hit)}")
    tail_text = pa.array(tails, pa.string())
    names = batch.schema.names
    locator = (columns.source_topic, columns.source_partition, columns.source_offset)
    if all(c in names for c in locator):
        parts = [
            (sep, batch.column(c), pick) for sep, c in zip(("", ":", "@"), locator, strict=True)
        ]
        out = concat_text([*parts, ("", tail_text, which)], len(which))
        if out is not None:
            return out
    tail = tail_text.take(pa.array(which))
    if not all(c in names for c in locator):
        return pc.binary_join_element_wise(locator_strings(batch, columns, rows=rows), tail, "")
    take = None if pick is None else pa.array(pick, pa.int64())

    def text(name: str) -> pa.Array:
        col = batch.column(name)
        return (col if take is None else col.take(take)).cast(pa.string())

    topic, partition, offset = (text(c) for c in locator)
    return pc.binary_join_element_wise(topic, ":", partition, "@", offset, tail, "")


def _is_identity(rows: np.ndarray, n: int) -> bool:
    """Whether ``rows`` are all rows of a batch of ``n``, in order."""
    return len(rows) == n and (n == 0 or bool(np.array_equal(rows, np.arange(n))))


def _messages_from_lists(
    batch: pa.RecordBatch,
    evaluation: Evaluation,
    ruleset: RuleSet,
    failed: pa.ListArray,
    columns: MetadataColumns,
    rows: np.ndarray | None,
) -> pa.Array:
    """:func:`messages` from the per-row lists of failed ids (any number of rules)."""
    n = batch.num_rows
    first = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    for idx, mask in zip(evaluation.rule_index, evaluation.masks, strict=True):
        pick = mask & ~seen
        first[pick] = idx
        seen |= mask
    if rows is not None:
        take = pa.array(rows, pa.int64())
        first = first[rows]
        failed = failed.take(take)
    words = ruleset.descriptions.take(pa.array(first))
    locators = locator_strings(batch, columns, rows=rows)
    head = pc.binary_join_element_wise(locators, words, ": expected ")
    return pc.binary_join_element_wise(head, pc.binary_join(failed, ", "), "; failed rules: ")
