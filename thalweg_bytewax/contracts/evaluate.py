"""Vectorised rule evaluation over Arrow batches.

Every rule evaluates to one boolean "failed" mask per batch with ``pyarrow.compute``;
SQL predicates and the string-to-type conformance checks run in DuckDB, all of a batch's
SQL in one query. Nothing here loops over rows in Python: per-row results (the list of
failed rule ids, DLQ messages) are assembled from the masks with numpy and Arrow kernels.

User SQL runs sandboxed (:mod:`thalweg_bytewax.contracts._sandbox`): each rule set has
its own in-memory DuckDB database with ``enable_external_access=false`` and
``lock_configuration``, a cursor per thread, batches registered explicitly, and a time
bound per query. A rule whose SQL errs or runs past the bound fails every row of the
batch (logged, counted in :attr:`RuleSet.sql_failures`); it never raises, because a
batch that crashes the flow is replayed after the restart and crashes it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from thalweg_bytewax._deps import require
from thalweg_bytewax.contracts._sandbox import (
    DEFAULT_SQL_TIMEOUT_SECONDS,
    Sandbox,
    SqlTimeoutError,
    check_expression,
    check_query,
    predicate_sql,
    scalar_sql,
)
from thalweg_bytewax.contracts.rules import merge_rules
from thalweg_bytewax.contracts.spec import (
    RULE_VERSION_CHARS,
    ContractError,
    ContractSpec,
    DropRule,
    MetricOp,
    Rule,
    RuleKind,
)
from thalweg_bytewax.dlq import read_parquet_lane
from thalweg_bytewax.metadata import RECORD_ID_BYTES, MetadataColumns

__all__ = [
    "AUDIT_FAILED_RULES",
    "DEFAULT_SQL_TIMEOUT_SECONDS",
    "AUDIT_RULESET_VERSION",
    "AUDIT_VERDICT",
    "Evaluation",
    "RuleSet",
    "SqlTimeoutError",
    "audit_schema",
    "check_pattern",
    "check_sql",
    "check_sql_shape",
    "duplicate_mask",
    "duckdb_cursor",
    "evaluate",
    "explode_audit",
    "read_audit",
    "read_rule_registry",
    "rules_schema",
]

logger = logging.getLogger(__name__)

AUDIT_STEP_ID = "step_id"
"""Audit column: the validating step."""
AUDIT_RULESET_VERSION = "ruleset_version"
"""Audit column: the version of the rule set that judged the record."""
AUDIT_VERDICT = "verdict"
"""Audit column: ``pass``, ``fail`` or ``drop``."""
AUDIT_FAILED_RULES = "failed_rules"
"""Audit column: ids (``name@version``) of the rules the record failed."""
AUDIT_EVALUATED_AT = "evaluated_at"
"""Audit column: when the record was judged (UTC)."""

_DEFAULT_COLUMNS = MetadataColumns()
_BATCH = "batch"


def audit_schema(columns: MetadataColumns = _DEFAULT_COLUMNS) -> pa.Schema:
    """The compact audit form: one row per record, its verdict and failed rule ids.

    A record passed every rule of its rule set that is not listed in ``failed_rules``;
    with the rule registry (:func:`rules_schema`) that answers "which verdict did record
    R get on rule X, under which version" for every record and rule.
    """
    return pa.schema(
        [
            pa.field(columns.record_id, pa.binary(RECORD_ID_BYTES)),
            pa.field(columns.source_topic, pa.string()),
            pa.field(columns.source_partition, pa.int32()),
            pa.field(columns.source_offset, pa.int64()),
            pa.field(AUDIT_STEP_ID, pa.string(), nullable=False),
            pa.field(AUDIT_RULESET_VERSION, pa.string(), nullable=False),
            pa.field(AUDIT_VERDICT, pa.string(), nullable=False),
            pa.field(AUDIT_FAILED_RULES, pa.list_(pa.string()), nullable=False),
            pa.field(AUDIT_EVALUATED_AT, pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def rules_schema() -> pa.Schema:
    """The rule registry: one row per rule of a rule set, with its full definition."""
    return pa.schema(
        [
            pa.field(AUDIT_RULESET_VERSION, pa.string(), nullable=False),
            pa.field("rule_id", pa.string(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("version", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("columns", pa.list_(pa.string()), nullable=False),
            pa.field("reason", pa.string(), nullable=False),
            pa.field("origin", pa.string(), nullable=False),
            pa.field("definition", pa.string(), nullable=False),
        ]
    )


# --- DuckDB session ------------------------------------------------------------------

_session_lock = threading.Lock()
_session: tuple[int, Any] | None = None
_local = threading.local()


def duckdb_cursor() -> Any:
    """This thread's cursor on the process's sandboxed DuckDB connection.

    For this package's own queries over audit lanes (:func:`explode_audit`). Contract
    SQL never runs here: each rule set has its own :class:`Sandbox`. External access is
    off and the configuration locked.
    """
    global _session
    pid = os.getpid()
    cur = getattr(_local, "cursor", None)
    if cur is not None and getattr(_local, "pid", None) == pid:
        return cur
    with _session_lock:
        if _session is None or _session[0] != pid:
            duckdb = require("duckdb", extra="sql")
            con = duckdb.connect()
            con.execute("SET enable_external_access=false")
            con.execute("SET lock_configuration=true")
            _session = (pid, con)
        cur = _session[1].cursor()
    _local.cursor = cur
    _local.pid = pid
    return cur


def _duckdb_errors() -> tuple[type[Exception], ...]:
    duckdb = require("duckdb", extra="sql")
    return (duckdb.Error, SqlTimeoutError)


def check_pattern(pattern: str) -> None:
    """Compile ``pattern`` with the RE2 engine the evaluation uses.

    Raises:
        ContractError: When the pattern does not compile.
    """
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = f"pattern {pattern!r} does not compile: {exc}"
        raise ContractError(msg) from exc


def check_sql_shape(expression: str, *, scalar: bool = False) -> None:
    """Refuse SQL that is not one expression (a predicate) or one ``SELECT`` (``scalar``).

    Raises:
        ContractError: Naming what was expected.
    """
    if scalar:
        check_query(expression)
    else:
        check_expression(expression)


def _is_metric_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def check_sql(
    expression: str,
    schema: pa.Schema,
    *,
    scalar: bool = False,
    sandbox: Sandbox | None = None,
) -> None:
    """Check a SQL predicate (or scalar batch query) and bind it against ``schema``.

    A predicate must be exactly one expression yielding one value per row (no
    aggregate); a scalar query exactly one ``SELECT`` yielding one numeric or boolean
    column. Binding runs on ``sandbox`` (a fresh one when omitted), never on a
    connection another contract uses.

    Raises:
        ContractError: When it has the wrong shape, or DuckDB cannot parse or bind it
            (e.g. a missing column).
    """
    check_sql_shape(expression, scalar=scalar)
    box = sandbox or Sandbox()
    empty = schema.empty_table()
    try:
        if scalar:
            result = box.query({_BATCH: empty}, f"{scalar_sql(expression)} LIMIT 0")
        else:
            result = box.query(
                {_BATCH: empty},
                f"SELECT {predicate_sql(expression)} AS ok FROM {_BATCH}",  # noqa: S608
            )
    except _duckdb_errors() as exc:
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"SQL {expression!r} is invalid: {line}"
        raise ContractError(msg) from exc
    if scalar and (result.num_columns != 1 or not _is_metric_type(result.schema.field(0).type)):
        got = [f"{f.name} {f.type}" for f in result.schema]
        msg = f"SQL {expression!r}: expected one numeric or boolean column; got {got!r}"
        raise ContractError(msg)
    if not scalar and (result.num_columns != 1 or result.num_rows != 0):
        msg = (
            f"SQL {expression!r}: expected a row predicate (one value per row); got an "
            "aggregate or a set of values; use a `sql` metric for whole-batch checks"
        )
        raise ContractError(msg)


def _duckdb_type(t: pa.DataType) -> str | None:
    simple = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.uint8(): "UTINYINT",
        pa.uint16(): "USMALLINT",
        pa.uint32(): "UINTEGER",
        pa.uint64(): "UBIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.date32(): "DATE",
        pa.time64("us"): "TIME",
        pa.binary(): "BLOB",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    return None


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- Rule sets -----------------------------------------------------------------------


class RuleSet:
    """An immutable, checked set of rules (and drop rules) with one version.

    The rule-set version hashes the sorted rule ids, so it changes exactly when a rule
    is added, removed or redefined. Audit rows carry it; :meth:`manifest` is the rule
    registry that resolves it.

    Its SQL runs on the rule set's own :class:`Sandbox` (an isolated DuckDB database,
    opened on first use), each query bounded by ``sql_timeout_seconds``. A rule whose
    SQL errs or is interrupted fails every row of that batch (a drop rule drops
    nothing); each such event is counted in :attr:`sql_failures` and logged once per
    rule and cause.

    Args:
        rules: The (already merged) rules.
        drop: Drop rules.
        sql_timeout_seconds: Time bound of each SQL query over one batch (``None``: no
            bound). Default :data:`DEFAULT_SQL_TIMEOUT_SECONDS`.

    Raises:
        ContractError: When a pattern does not compile, a rule's SQL is not exactly one
            expression (or one ``SELECT`` for a ``sql`` metric), or the bound is not
            positive.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        drop: Sequence[DropRule] = (),
        *,
        sql_timeout_seconds: float | None = DEFAULT_SQL_TIMEOUT_SECONDS,
    ) -> None:
        self.rules = tuple(rules)
        self.drop = tuple(drop)
        self.sandbox = Sandbox(sql_timeout_seconds)
        self.sql_failures: dict[str, int] = {}
        """Batches in which a rule's (or drop rule's) SQL erred or timed out, by id."""
        self._reported: set[tuple[str, str]] = set()
        ids = [r.id for r in self.rules]
        if len(set(ids)) != len(ids):
            msg = f"rule set: expected unique rule ids; got {sorted(ids)!r}"
            raise ContractError(msg)
        for rule in self.rules:
            if rule.pattern is not None:
                check_pattern(rule.pattern)
            if rule.expression is not None:
                try:
                    check_sql_shape(rule.expression, scalar=rule.kind is RuleKind.METRIC)
                except ContractError as exc:
                    msg = f"rule set: rule `{rule.name}`: {exc}"
                    raise ContractError(msg) from exc
        for drop_rule in self.drop:
            if drop_rule.expression is not None:
                try:
                    check_sql_shape(drop_rule.expression)
                except ContractError as exc:
                    msg = f"rule set: drop rule `{drop_rule.name}`: {exc}"
                    raise ContractError(msg) from exc
        body = json.dumps(sorted(ids) + sorted(d.id for d in self.drop))
        self.version = hashlib.sha256(body.encode()).hexdigest()[:RULE_VERSION_CHARS]
        self.ids = pa.array(ids, pa.string())
        self.descriptions = pa.array([r.describe() for r in self.rules], pa.string())

    @classmethod
    def from_contract(
        cls,
        contract: ContractSpec | None,
        *,
        object_name: str | None = None,
        rules: Sequence[Rule] = (),
        drop: Sequence[DropRule] = (),
        sql_timeout_seconds: float | None = DEFAULT_SQL_TIMEOUT_SECONDS,
    ) -> RuleSet:
        """The rule set a contract and manual rules resolve to (tightest wins).

        Manual rules on columns the contract does not declare are refused; without a
        contract, manual rules stand alone. ``sql_timeout_seconds`` bounds each SQL
        query over one batch (see :class:`RuleSet`).

        Raises:
            ContractError: On a rule on a missing column, SQL that does not bind, a
                pattern that does not compile or conflicting rules.
        """
        if contract is None:
            return cls(merge_rules((), rules), drop, sql_timeout_seconds=sql_timeout_seconds)
        obj = contract.object(object_name)
        ruleset = cls(
            merge_rules(obj.rules, rules), drop, sql_timeout_seconds=sql_timeout_seconds
        )
        # Rules may also look at the metadata columns (e.g. drop test topics).
        meta = [f for f in _DEFAULT_COLUMNS.raw_schema if f.name not in obj.column_names]
        schema = pa.schema([*obj.arrow_schema, *meta])
        ruleset.check_against(schema, where=f"contract `{contract.source}` object `{obj.name}`")
        return ruleset

    def manifest(self) -> pa.Table:
        """The rule registry of this rule set: one row per rule, with its definition."""
        rules = self.rules
        return pa.table(
            {
                AUDIT_RULESET_VERSION: [self.version] * len(rules),
                "rule_id": [r.id for r in rules],
                "name": [r.name for r in rules],
                "version": [r.version for r in rules],
                "kind": [str(r.kind) for r in rules],
                "columns": [list(r.columns) for r in rules],
                "reason": [r.reason for r in rules],
                "origin": [str(r.origin) for r in rules],
                "definition": [
                    json.dumps(r.definition(), sort_keys=True, default=str) for r in rules
                ],
            },
            schema=rules_schema(),
        )

    def check_against(self, schema: pa.Schema, *, where: str) -> None:
        """Refuse rules on columns ``schema`` lacks, and SQL that does not bind to it.

        Raises:
            ContractError: Naming the rule and the missing column or the SQL error.
        """
        known = set(schema.names)
        for rule in self.rules:
            for col in rule.columns:
                if col not in known:
                    msg = (
                        f"{where}: rule `{rule.name}` is on a missing column; expected one of "
                        f"{sorted(known)!r}; got {col!r}"
                    )
                    raise ContractError(msg)
            if rule.expression is not None:
                try:
                    check_sql(
                        rule.expression,
                        schema,
                        scalar=rule.kind is RuleKind.METRIC,
                        sandbox=self.sandbox,
                    )
                except ContractError as exc:
                    msg = f"{where}: rule `{rule.name}`: {exc}"
                    raise ContractError(msg) from exc
        for drop in self.drop:
            if drop.column is not None and drop.column not in known:
                msg = (
                    f"{where}: drop rule `{drop.name}` is on a missing column; expected one "
                    f"of {sorted(known)!r}; got {drop.column!r}"
                )
                raise ContractError(msg)
            if drop.expression is not None:
                try:
                    check_sql(drop.expression, schema, sandbox=self.sandbox)
                except ContractError as exc:
                    msg = f"{where}: drop rule `{drop.name}`: {exc}"
                    raise ContractError(msg) from exc

    def sql_failed(self, rule_id: str, exc: BaseException) -> None:
        """Record that ``rule_id``'s SQL erred or timed out on a batch (count, log once)."""
        self.sql_failures[rule_id] = self.sql_failures.get(rule_id, 0) + 1
        cause = "timeout" if isinstance(exc, SqlTimeoutError) else type(exc).__name__
        if (rule_id, cause) in self._reported:
            return
        self._reported.add((rule_id, cause))
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else cause
        logger.warning(
            "rule set %s: rule %s failed every row of a batch: its SQL %s (%s); further "
            "batches with this outcome are counted in sql_failures, not logged",
            self.version,
            rule_id,
            f"ran past {self.sandbox.timeout_seconds} s" if cause == "timeout" else "erred",
            text,
        )

    def check_batch(self, schema: pa.Schema, *, where: str) -> None:
        """Refuse a batch that lacks a column a rule or drop rule needs to judge it.

        ``not_null``, ``type`` and batch metric rules fail every row of such a batch
        (the records go to the DLQ); every other rule would pass every row, and a drop
        rule would drop nothing, so those raise instead.

        Raises:
            ContractError: Naming the rule (or drop rule) and the missing column.
        """
        names = set(schema.names)
        for rule in self.rules:
            if rule.kind in (RuleKind.NOT_NULL, RuleKind.TYPE, RuleKind.METRIC):
                continue
            for col in rule.columns:
                if col not in names:
                    msg = (
                        f"{where}: rule `{rule.id}` is on column {col!r}, which the batch "
                        f"lacks; expected one of {sorted(names)!r}"
                    )
                    raise ContractError(msg)
        for drop in self.drop:
            if drop.column is not None and drop.column not in names:
                msg = (
                    f"{where}: drop rule `{drop.id}` is on column {drop.column!r}, which the "
                    f"batch lacks; expected one of {sorted(names)!r}"
                )
                raise ContractError(msg)


# --- Evaluation ----------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluation:
    """The verdicts of one batch.

    Attributes:
        num_rows: Rows evaluated.
        rule_index: Indices (into the rule set) of the rules that failed somewhere.
        masks: One failed-mask per entry of ``rule_index`` (numpy bool, length rows).
        any_failed: Rows that failed at least one rule.
        contract_failed: Rows that failed a schema rule (DLQ reason ``contract``).
    """

    num_rows: int
    rule_index: tuple[int, ...]
    masks: tuple[np.ndarray, ...]
    any_failed: np.ndarray
    contract_failed: np.ndarray

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

    def first_failure(self) -> tuple[int, int] | None:
        """``(row, rule index)`` of the first failing row and its first failed rule."""
        if not self.any_failed.any():
            return None
        row = int(np.argmax(self.any_failed))
        for idx, mask in zip(self.rule_index, self.masks, strict=True):
            if mask[row]:
                return row, idx
        return None  # pragma: no cover - any_failed implies a mask


def _np(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    try:
        return pa.scalar(value).cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.scalar(value)


def duplicate_mask(batch: pa.RecordBatch, cols: Sequence[str]) -> np.ndarray:
    """Rows whose key already occurred earlier in the batch (rows with a null key never)."""
    n = batch.num_rows
    idx_name = "__twg_row"
    table = pa.table(
        [batch.column(c) for c in cols] + [pa.array(np.arange(n))], names=[*cols, idx_name]
    )
    firsts = table.group_by(list(cols), use_threads=False).aggregate([(idx_name, "min")])
    first = np.zeros(n, dtype=bool)
    first[firsts.column(f"{idx_name}_min").to_numpy()] = True
    dup = ~first
    for c in cols:
        col = batch.column(c)
        if col.null_count:
            dup &= ~_np(col.is_null())
    return dup


def _missing(n: int) -> np.ndarray:
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


def _row_rule(rule: Rule, batch: pa.RecordBatch, n: int) -> np.ndarray | None:  # noqa: C901
    names = batch.schema.names
    col_name = rule.columns[0] if rule.columns else None
    if col_name is not None and any(c not in names for c in rule.columns):
        return _missing(n) if rule.kind in (RuleKind.NOT_NULL, RuleKind.TYPE) else None
    col = batch.column(col_name) if col_name is not None else None
    match rule.kind:
        case RuleKind.NOT_NULL:
            assert col is not None
            return _np(col.is_null()) if col.null_count else None
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
            return _np(pc.and_(pc.invert(inside), col.is_valid()))
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
            return None if bad is None else _np(bad)
        case RuleKind.LENGTH:
            assert col is not None
            lengths = pc.binary_length(col) if pa.types.is_binary(col.type) else pc.utf8_length(col)
            bad = None
            if rule.min_length is not None:
                bad = pc.less(lengths, rule.min_length)
            if rule.max_length is not None:
                over = pc.greater(lengths, rule.max_length)
                bad = over if bad is None else pc.or_(bad, over)
            return None if bad is None else _np(bad)
        case RuleKind.PATTERN:
            assert col is not None and rule.pattern is not None
            text = (
                col
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                else col.cast(pa.string())
            )
            return _np(pc.invert(pc.match_substring_regex(text, rule.pattern)))
        case _:
            return None


def _metric_rule(
    rule: Rule, batch: pa.RecordBatch, n: int, ruleset: RuleSet
) -> np.ndarray | None:
    metric = rule.metric
    names = batch.schema.names
    if any(c not in names for c in rule.columns):
        return _missing(n)
    col = batch.column(rule.columns[0]) if rule.columns else None
    if metric == "rowCount":
        value: Any = n
        contributing = _missing(n)
    elif metric == "sql":
        contributing = _missing(n)
        try:
            result = ruleset.sandbox.query({_BATCH: batch}, scalar_sql(str(rule.expression)))
        except _duckdb_errors() as exc:
            ruleset.sql_failed(rule.id, exc)
            return contributing
        # No row is no metric, the same as NULL (see _compare).
        value = result.column(0)[0].as_py() if result.num_rows and result.num_columns else None
    else:
        assert col is not None
        if metric == "nullValues":
            contributing = _np(col.is_null())
        elif metric == "missingValues":
            markers = [v for v in (rule.values or ()) if v is not None]
            contributing = _np(col.is_null())
            if markers:
                contributing |= _np(pc.is_in(col, value_set=pa.array(markers, type=col.type)))
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
            contributing = _np(pc.and_(pc.invert(valid), col.is_valid()))
        else:  # duplicateValues
            contributing = duplicate_mask(batch, rule.columns)
        value = int(contributing.sum())
        if rule.unit == "percent":
            value = 100.0 * value / n if n else 0.0
    if _compare(value, rule.op or MetricOp.MUST_BE, rule.threshold):
        return None
    return contributing


class _ShapeError(Exception):
    """A predicate query returned other than one value per row and predicate."""


def _predicate_masks(
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
        result = ruleset.sandbox.query({_BATCH: batch}, f"SELECT {select} FROM {_BATCH}")  # noqa: S608
        if result.num_columns != len(chunk) or result.num_rows != n:
            msg = f"expected {len(chunk)} columns of {n} rows; got {result.shape}"
            raise _ShapeError(msg)
        return {key: _np(result.column(k)) for k, (key, _, _) in enumerate(chunk)}

    errors: tuple[type[Exception], ...] = (*_duckdb_errors(), _ShapeError)
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


def _sql_masks(
    batch: pa.RecordBatch,
    sql_rules: Sequence[tuple[int, Rule]],
    type_rules: Sequence[tuple[int, Rule]],
    ruleset: RuleSet,
) -> dict[int, np.ndarray]:
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
    masks = _predicate_masks(batch, items, ruleset)
    return {key: _missing(n) if mask is None else mask for key, mask in masks.items()}


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
    c = _ident(column)
    t = _duckdb_type(target)
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
            fails += f" OR CAST(TRY_CAST({c} AS {t}) AS {_duckdb_type(source)}) <> {c}"
    return f"{c} IS NOT NULL AND ({fails})"


def _shape(t: pa.DataType) -> str:
    # Nested field nullability is the contract's business (not_null rules), not type's.
    return str(t).replace(" not null", "")


def _as_type(t: pa.DataType | str | None) -> pa.DataType:
    if isinstance(t, pa.DataType):
        return t
    return pa.type_for_alias(str(t))


def _type_check(rule: Rule, batch: pa.RecordBatch, n: int) -> tuple[np.ndarray | None, bool]:
    """``(mask, needs_sql)``: the failed mask, or a request for a DuckDB TRY_CAST check."""
    name = rule.columns[0]
    if name not in batch.schema.names:
        return _missing(n), False
    col = batch.column(name)
    target = _as_type(rule.arrow_type)
    if col.type == target or col.null_count == n or _shape(col.type) == _shape(target):
        return None, False
    sql_ok = _duckdb_type(target) is not None and _duckdb_type(col.type) is not None
    if sql_ok and pa.types.is_decimal(target) and pa.types.is_floating(col.type):
        # Arrow's float-to-decimal cast rounds silently; the SQL check is exact.
        return None, True
    try:
        col.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        if sql_ok:
            return None, True
        return _np(col.is_valid()), False
    return None, False


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
            mask, needs_sql = _type_check(rule, batch, n)
            if needs_sql:
                type_rules.append((i, rule))
        elif rule.kind is RuleKind.METRIC:
            mask = _metric_rule(rule, batch, n, ruleset)
        else:
            mask = _row_rule(rule, batch, n)
        if mask is not None and mask.any():
            found[i] = mask
    if n and (sql_rules or type_rules):
        for i, mask in _sql_masks(batch, sql_rules, type_rules, ruleset).items():
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
    for i, mask in zip(order, masks, strict=True):
        any_failed |= mask
        if ruleset.rules[i].reason == "contract":
            contract_failed |= mask
    return Evaluation(n, order, masks, any_failed, contract_failed)


def drop_masks(
    batch: pa.RecordBatch, drop: Sequence[DropRule], *, ruleset: RuleSet | None = None
) -> list[np.ndarray]:
    """One matched mask per drop rule (rows to discard).

    SQL drop rules run on ``ruleset``'s sandbox (a fresh rule set of ``drop`` when
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
            (i, f"coalesce({predicate_sql(str(d.expression))}, false)", d.id)
            for i, d in sql_rules
        ]
        for i, mask in _predicate_masks(batch, items, owner).items():
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
            out.append(_np(pc.is_in(col, value_set=value_set)))
    return out


def locator_strings(batch: pa.RecordBatch, columns: MetadataColumns = _DEFAULT_COLUMNS) -> pa.Array:
    """``topic:partition@offset`` per row, or ``row <i>`` where the batch has no locator."""
    names = batch.schema.names
    if all(
        c in names for c in (columns.source_topic, columns.source_partition, columns.source_offset)
    ):
        return pc.binary_join_element_wise(
            batch.column(columns.source_topic).cast(pa.string()),
            pc.binary_join_element_wise(
                batch.column(columns.source_partition).cast(pa.string()),
                batch.column(columns.source_offset).cast(pa.string()),
                "@",
            ),
            ":",
        )
    return pc.binary_join_element_wise(
        pa.array(["row"] * batch.num_rows),
        pa.array(np.arange(batch.num_rows)).cast(pa.string()),
        " ",
    )


def messages(
    batch: pa.RecordBatch,
    evaluation: Evaluation,
    ruleset: RuleSet,
    failed: pa.ListArray,
    *,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.Array:
    """A human message per row: locator, the first failed rule in words, all failed ids."""
    n = batch.num_rows
    first = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    for idx, mask in zip(evaluation.rule_index, evaluation.masks, strict=True):
        pick = mask & ~seen
        first[pick] = idx
        seen |= mask
    words = ruleset.descriptions.take(pa.array(first))
    head = pc.binary_join_element_wise(locator_strings(batch, columns), words, ": expected ")
    return pc.binary_join_element_wise(head, pc.binary_join(failed, ", "), "; failed rules: ")


def audit_batch(
    batch: pa.RecordBatch,
    *,
    verdict: pa.Array,
    failed: pa.ListArray,
    step_id: str,
    ruleset_version: str,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.RecordBatch:
    """Build compact audit rows (one per record of ``batch``), columnar."""
    n = batch.num_rows
    names = batch.schema.names
    schema = audit_schema(columns)

    def take(name: str, type_: pa.DataType) -> pa.Array:
        if name in names:
            col = batch.column(name)
            return col if col.type == type_ else col.cast(type_)
        return pa.nulls(n, type_)

    arrays = [
        take(columns.record_id, pa.binary(RECORD_ID_BYTES)),
        take(columns.source_topic, pa.string()),
        take(columns.source_partition, pa.int32()),
        take(columns.source_offset, pa.int64()),
        pa.repeat(pa.scalar(step_id, pa.string()), n),
        pa.repeat(pa.scalar(ruleset_version, pa.string()), n),
        verdict,
        failed,
        pa.repeat(pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC")), n),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_EXPLODE_SQL = """
SELECT a.*  EXCLUDE ({excluded}), r.name AS rule, r.rule_id, r.version AS rule_version,
       CASE WHEN a.verdict = 'drop' THEN 'drop'
            WHEN list_contains(a.failed_rules, r.rule_id) THEN 'fail'
            ELSE 'pass' END AS rule_verdict
FROM audit a JOIN rules r USING (ruleset_version)
ORDER BY ALL
"""


def explode_audit(audit: pa.Table, rules: pa.Table) -> pa.Table:
    """Expand compact audit rows to one row per (record, rule): verdict and rule version.

    This is the question the compact form answers, as a query: a record failed exactly
    the rules listed in its ``failed_rules`` and passed every other rule of its rule set.

    Args:
        audit: Audit rows (:func:`audit_schema`).
        rules: The rule registry (:meth:`RuleSet.manifest`), all versions.

    Returns:
        The audit columns (minus ``failed_rules``) plus ``rule``, ``rule_id``,
        ``rule_version`` and ``rule_verdict``.
    """
    cur = duckdb_cursor()
    cur.register("audit", audit)
    cur.register("rules", rules)
    try:
        return cur.sql(_EXPLODE_SQL.format(excluded=AUDIT_FAILED_RULES)).to_arrow_table()
    finally:
        cur.unregister("audit")
        cur.unregister("rules")


def read_audit(
    source: str | os.PathLike[str] | ds.Dataset,
    *,
    verdict: str | Sequence[str] | None = None,
    ruleset_version: str | Sequence[str] | None = None,
    filesystem: pafs.FileSystem | None = None,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.Table:
    """Read an audit lane back, e.g. one written by ``ParquetSink`` from ``validate(...).audit``.

    With the rule registry (:func:`read_rule_registry`), :func:`explode_audit` turns it
    into one verdict per (record, rule)::

        audit = read_audit("lake/audit", verdict="fail")
        per_rule = explode_audit(audit, read_rule_registry("lake/rules"))

    Args:
        source: The lane directory (local path or URI), or a ``pyarrow.dataset.Dataset``.
        verdict: Keep only rows with this verdict (``pass``, ``fail``, ``drop``) or any of
            these.
        ruleset_version: Keep only rows judged by this rule-set version (or these).
        filesystem: A ``pyarrow.fs.FileSystem`` for ``source``.
        columns: Metadata column names (the prefix), for the schema of an empty lane.

    Returns:
        The audit rows (:func:`audit_schema` plus the columns the sink adds, such as
        ``_twg_emit_ts``), filtered.
    """
    expr = None
    for name, wanted in ((AUDIT_VERDICT, verdict), (AUDIT_RULESET_VERSION, ruleset_version)):
        if wanted is not None:
            values = [wanted] if isinstance(wanted, str) else list(wanted)
            clause = ds.field(name).isin(values)
            expr = clause if expr is None else expr & clause
    return read_parquet_lane(source, audit_schema(columns), filter=expr, filesystem=filesystem)


def read_rule_registry(
    source: str | os.PathLike[str] | ds.Dataset, *, filesystem: pafs.FileSystem | None = None
) -> pa.Table:
    """Read rule registry files (:meth:`RuleSet.manifest`, one file per version) as one table."""
    return read_parquet_lane(source, rules_schema(), filesystem=filesystem)
