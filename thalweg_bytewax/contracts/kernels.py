"""Evaluation kernels: one rule over one Arrow batch, to one boolean "failed" mask.

Row rules evaluate with ``pyarrow.compute``; SQL predicates and the string-to-type
conformance checks run in DuckDB on the rule set's own session, all of a batch's SQL in
one query. Nothing here loops over rows in Python. A rule whose SQL errs or runs past
the time bound fails every row of the batch (a drop rule drops nothing); it never
raises, because a batch that crashes the flow is replayed after the restart and
crashes it again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.contracts.checks import BATCH_TABLE
from thalweg_bytewax.contracts.duplicates import duplicate_mask
from thalweg_bytewax.contracts.ruleset import RuleSet
from thalweg_bytewax.contracts.spec import MetricOp, Rule, RuleKind
from thalweg_bytewax.sql.bounds import engine_errors
from thalweg_bytewax.sql.syntax import duckdb_type, predicate_sql, quote_ident, scalar_sql

__all__ = [
    "all_rows",
    "duplicate_mask",
    "failed_mask",
    "metric_rule_mask",
    "predicate_masks",
    "row_rule_mask",
    "sql_masks",
    "type_check",
]


def failed_mask(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow mask as a numpy bool array, null counted as false."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    try:
        return pa.scalar(value).cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.scalar(value)


def all_rows(n: int) -> np.ndarray:
    """A mask that fails every one of ``n`` rows."""
    return np.ones(n, dtype=bool)


def _compare(value: Any, op: MetricOp, threshold: Any) -> bool:
    """Whether the metric ``value`` meets the threshold.

    No value (NULL, no row, NaN) meets any threshold, whatever the operator: ODCS judges
    a measured value, and a metric that measured nothing has not shown that the data is
    good. A value that does not compare with the threshold does not meet it either.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    try:
        return _compare_value(value, op, threshold)
    except TypeError:
        return False


def _compare_value(value: Any, op: MetricOp, threshold: Any) -> bool:
    match op:
        case MetricOp.MUST_BE:
            return bool(value == threshold)
        case MetricOp.MUST_NOT_BE:
            return bool(value != threshold)
        case MetricOp.GT:
            return bool(value > threshold)
        case MetricOp.GE:
            return bool(value >= threshold)
        case MetricOp.LT:
            return bool(value < threshold)
        case MetricOp.LE:
            return bool(value <= threshold)
        case MetricOp.BETWEEN:
            return bool(threshold[0] <= value <= threshold[1])
        case _:
            return not (threshold[0] <= value <= threshold[1])


def row_rule_mask(rule: Rule, batch: pa.RecordBatch, n: int) -> np.ndarray | None:  # noqa: C901
    """The failed mask of a row rule over ``batch`` (``None``: no row failed or n/a)."""
    names = batch.schema.names
    col_name = rule.columns[0] if rule.columns else None
    if col_name is not None and any(c not in names for c in rule.columns):
        return all_rows(n) if rule.kind in (RuleKind.NOT_NULL, RuleKind.TYPE) else None
    col = batch.column(col_name) if col_name is not None else None
    match rule.kind:
        case RuleKind.NOT_NULL:
            assert col is not None
            return failed_mask(col.is_null()) if col.null_count else None
        case RuleKind.UNIQUE:
            return duplicate_mask(batch, rule.columns)
        case RuleKind.ALLOWED_VALUES:
            assert col is not None
            values = list(rule.values or ())
            try:
                value_set = pa.array(values, type=col.type)
                inside = pc.is_in(col, value_set=value_set)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                inside = pc.is_in(
                    col.cast(pa.string()), value_set=pa.array([str(v) for v in values])
                )
            return failed_mask(pc.and_(pc.invert(inside), col.is_valid()))
        case RuleKind.RANGE:
            assert col is not None
            bad = None
            if rule.min is not None:
                lo = _scalar(rule.min, col.type)
                bad = pc.less(col, lo) if rule.min_inclusive else pc.less_equal(col, lo)
            if rule.max is not None:
                hi = _scalar(rule.max, col.type)
                over = pc.greater(col, hi) if rule.max_inclusive else pc.greater_equal(col, hi)
                bad = over if bad is None else pc.or_(bad, over)
            if bad is not None and pa.types.is_floating(col.type):
                # NaN compares false both ways: it is outside every range (null stays null).
                bad = pc.or_(bad, pc.is_nan(col))
            return None if bad is None else failed_mask(bad)
        case RuleKind.LENGTH:
            assert col is not None
            lengths = pc.binary_length(col) if pa.types.is_binary(col.type) else pc.utf8_length(col)
            bad = None
            if rule.min_length is not None:
                bad = pc.less(lengths, rule.min_length)
            if rule.max_length is not None:
                over = pc.greater(lengths, rule.max_length)
                bad = over if bad is None else pc.or_(bad, over)
            return None if bad is None else failed_mask(bad)
        case RuleKind.PATTERN:
            assert col is not None and rule.pattern is not None
            text = (
                col
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                else col.cast(pa.string())
            )
            return failed_mask(pc.invert(pc.match_substring_regex(text, rule.pattern)))
        case _:
            return None


def metric_rule_mask(
    rule: Rule, batch: pa.RecordBatch, n: int, ruleset: RuleSet
) -> np.ndarray | None:
    """The failed mask of a batch metric rule, or ``None`` when the metric meets its threshold.

    A failing metric fails the rows that caused the failure. For a count metric
    (``nullValues``, ``missingValues``, ``invalidValues``, ``duplicateValues``) that
    depends on the side of the threshold the value fell on:

    * too high (``mustBeLessThan``, ``mustBeLessOrEqualTo``, above the upper bound of
      ``mustBeBetween``, above a ``mustBe`` value): the rows that contribute to the metric
      (the nulls, the invalid values, the duplicates);
    * too low (``mustBeGreaterThan``, ``mustBeGreaterOrEqualTo``, below the lower bound
      of ``mustBeBetween``, below a ``mustBe`` value): the rows that do *not* contribute
      (too few nulls is the fault of the rows that have a value);
    * no side (``mustNotBe``, ``mustNotBeBetween``, a value that does not compare): the
      whole batch, as for ``rowCount`` and ``sql`` metrics, which no row contributes to
      apart from the others.

    A ``sql`` metric runs on ``ruleset``'s session; when it errs or times out the rule
    fails every row (reported through :meth:`RuleSet.sql_failed`).
    """
    metric = rule.metric
    names = batch.schema.names
    if any(c not in names for c in rule.columns):
        return all_rows(n)
    col = batch.column(rule.columns[0]) if rule.columns else None
    if metric == "rowCount":
        value: Any = n
        contributing = all_rows(n)
    elif metric == "sql":
        contributing = all_rows(n)
        try:
            result = ruleset.session.query({BATCH_TABLE: batch}, scalar_sql(str(rule.expression)))
        except engine_errors() as exc:
            ruleset.sql_failed(rule.id, exc)
            return contributing
        # No row is no metric, the same as NULL (see _compare).
        value = result.column(0)[0].as_py() if result.num_rows and result.num_columns else None
    else:
        assert col is not None
        if metric == "nullValues":
            contributing = failed_mask(col.is_null())
        elif metric == "missingValues":
            markers = [v for v in (rule.values or ()) if v is not None]
            contributing = failed_mask(col.is_null())
            if markers:
                is_marker = pc.is_in(col, value_set=pa.array(markers, type=col.type))
                contributing |= failed_mask(is_marker)
        elif metric == "invalidValues":
            valid = (
                pa.array([True] * len(col))
                if rule.values is None
                else pc.is_in(col, value_set=pa.array(list(rule.values), type=col.type))
            )
            if rule.pattern is not None:
                valid = pc.and_(
                    valid, pc.match_substring_regex(col.cast(pa.string()), rule.pattern)
                )
            contributing = failed_mask(pc.and_(pc.invert(valid), col.is_valid()))
        else:  # duplicateValues
            contributing = duplicate_mask(batch, rule.columns)
        value = int(contributing.sum())
        if rule.unit == "percent":
            value = 100.0 * value / n if n else 0.0
    op = rule.op or MetricOp.MUST_BE
    if _compare(value, op, rule.threshold):
        return None
    if metric in ("rowCount", "sql"):
        return contributing
    side = _failed_side(value, op, rule.threshold)
    if side is _HIGH:
        return contributing
    if side is _LOW:
        return ~contributing
    return all_rows(n)


_LOW = "low"
_HIGH = "high"


def _failed_side(value: Any, op: MetricOp, threshold: Any) -> str | None:
    """Whether a failing ``value`` is too low or too high (``None``: neither, or unknown)."""
    match op:
        case MetricOp.GT | MetricOp.GE:
            lo, hi = threshold, math.inf
        case MetricOp.LT | MetricOp.LE:
            lo, hi = -math.inf, threshold
        case MetricOp.MUST_BE:
            lo, hi = threshold, threshold
        case MetricOp.BETWEEN:
            lo, hi = threshold
        case _:
            return None
    try:
        if value <= lo and not value >= hi:
            return _LOW
        if value >= hi and not value <= lo:
            return _HIGH
    except TypeError:
        return None
    return None


class _ShapeError(Exception):
    """A predicate query returned other than one value per row and predicate."""


def predicate_masks(
    batch: pa.RecordBatch,
    items: Sequence[tuple[int, str, str]],
    ruleset: RuleSet,
) -> dict[int, np.ndarray | None]:
    """Evaluate ``(key, select expression, rule id)`` items in one query over ``batch``.

    When the query errs or is interrupted, each item runs alone (so one bad rule does
    not take the others down); an item that still errs maps to ``None`` and is reported
    through :meth:`RuleSet.sql_failed`.
    """
    n = batch.num_rows

    def run(chunk: Sequence[tuple[int, str, str]]) -> dict[int, np.ndarray | None]:
        select = ", ".join(f"{e} AS r{k}" for k, (_, e, _) in enumerate(chunk))
        result = ruleset.session.query({BATCH_TABLE: batch}, f"SELECT {select} FROM {BATCH_TABLE}")  # noqa: S608
        if result.num_columns != len(chunk) or result.num_rows != n:
            msg = f"expected {len(chunk)} columns of {n} rows; got {result.shape}"
            raise _ShapeError(msg)
        return {key: failed_mask(result.column(k)) for k, (key, _, _) in enumerate(chunk)}

    errors: tuple[type[Exception], ...] = (*engine_errors(), _ShapeError)
    try:
        return run(items)
    except errors as exc:
        if len(items) == 1:
            ruleset.sql_failed(items[0][2], exc)
            return {items[0][0]: None}
    out: dict[int, np.ndarray | None] = {}
    for item in items:
        try:
            out.update(run([item]))
        except errors as exc:
            ruleset.sql_failed(item[2], exc)
            out[item[0]] = None
    return out


def sql_masks(
    batch: pa.RecordBatch,
    sql_rules: Sequence[tuple[int, Rule]],
    type_rules: Sequence[tuple[int, Rule]],
    ruleset: RuleSet,
) -> dict[int, np.ndarray]:
    """Failed masks (by rule index) of SQL predicates and of type checks that need SQL.

    All of them run in one query over ``batch``; a rule whose SQL errs or times out
    fails every row.
    """
    items: list[tuple[int, str, str]] = []
    for i, rule in sql_rules:
        items.append((i, f"{predicate_sql(str(rule.expression))} IS FALSE", rule.id))
    for i, rule in type_rules:
        source = batch.schema.field(rule.columns[0]).type
        check = _cast_fails_sql(rule.columns[0], source, _as_type(rule.arrow_type))
        items.append((i, check, rule.id))
    if not items:
        return {}
    n = batch.num_rows
    masks = predicate_masks(batch, items, ruleset)
    return {key: all_rows(n) if mask is None else mask for key, mask in masks.items()}


# A plain decimal literal with a non-zero digit after the first {scale} fractional digits.
_EXCESS_SCALE = r"^\s*[+-]?[0-9]*\.[0-9]{{{scale}}}[0-9]*[1-9][0-9]*\s*$"


def _cast_fails_sql(column: str, source: pa.DataType, target: pa.DataType) -> str:
    """A DuckDB predicate true where a non-null ``column`` does not convert to ``target``.

    ``TRY_CAST`` rounds into integer and decimal types (1.5 becomes 2), which would pass
    values the type cannot hold. For those targets the cast must also be exact: the
    converted value, cast back to the source type, equals the original; a string must
    denote the same number as its conversion and, written as a plain decimal, carry no
    non-zero digit beyond the target's scale.
    """
    c = quote_ident(column)
    t = duckdb_type(target)
    fails = f"TRY_CAST({c} AS {t}) IS NULL"
    if pa.types.is_integer(target) or pa.types.is_decimal(target):
        scale = target.scale if pa.types.is_decimal(target) else 0
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            fails += (
                f" OR CAST(TRY_CAST({c} AS {t}) AS DOUBLE)"
                f" IS DISTINCT FROM TRY_CAST({c} AS DOUBLE)"
                f" OR regexp_matches({c}, '{_EXCESS_SCALE.format(scale=scale)}')"
            )
        elif (
            pa.types.is_floating(source)
            or pa.types.is_decimal(source)
            or (pa.types.is_integer(source))
        ):
            fails += f" OR CAST(TRY_CAST({c} AS {t}) AS {duckdb_type(source)}) <> {c}"
    return f"{c} IS NOT NULL AND ({fails})"


def _shape(t: pa.DataType) -> str:
    # Nested field nullability is the contract's business (not_null rules), not type's.
    return str(t).replace(" not null", "")


def _as_type(t: pa.DataType | str | None) -> pa.DataType:
    if isinstance(t, pa.DataType):
        return t
    return pa.type_for_alias(str(t))


def type_check(rule: Rule, batch: pa.RecordBatch, n: int) -> tuple[np.ndarray | None, bool]:
    """``(mask, needs_sql)``: the failed mask, or a request for a DuckDB TRY_CAST check."""
    name = rule.columns[0]
    if name not in batch.schema.names:
        return all_rows(n), False
    col = batch.column(name)
    target = _as_type(rule.arrow_type)
    if col.type == target or col.null_count == n or _shape(col.type) == _shape(target):
        return None, False
    sql_ok = duckdb_type(target) is not None and duckdb_type(col.type) is not None
    if sql_ok and pa.types.is_decimal(target) and pa.types.is_floating(col.type):
        # Arrow's float-to-decimal cast rounds silently; the SQL check is exact.
        return None, True
    try:
        col.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        if sql_ok:
            return None, True
        return failed_mask(col.is_valid()), False
    return None, False
