"""A rule set: merged, checked rules and drop rules with one version.

The rule-set version hashes the sorted rule ids; audit rows carry it and the rule
registry (:meth:`RuleSet.manifest`) resolves it to rule definitions.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from datetime import timedelta

import pyarrow as pa

from thalweg_bytewax.config import UNSET, Unset, bound_keyword
from thalweg_bytewax.contracts.audit import AUDIT_RULESET_VERSION, rules_schema
from thalweg_bytewax.contracts.checks import (
    DEFAULT_SQL_MEMORY_LIMIT_BYTES,
    DEFAULT_SQL_TIMEOUT_SECONDS,
    check_pattern,
    check_sql,
    check_sql_shape,
)
from thalweg_bytewax.contracts.merge import merge_rules
from thalweg_bytewax.contracts.rule_spec import RULE_VERSION_CHARS
from thalweg_bytewax.contracts.spec import (
    ContractError,
    ContractSpec,
    DropRule,
    Rule,
    RuleKind,
)
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records import MetadataColumns
from thalweg_bytewax.sql.bounds import (
    SqlMemoryError,
    SqlTimeoutError,
    check_memory_limit,
    format_bytes,
)
from thalweg_bytewax.sql.engine import SqlSession

__all__ = [
    "DEFAULT_SQL_MEMORY_LIMIT_BYTES",
    "DEFAULT_SQL_TIMEOUT",
    "DEFAULT_SQL_TIMEOUT_SECONDS",
    "RuleSet",
]

logger = logging.getLogger(__name__)

_DEFAULT_COLUMNS = MetadataColumns()

# Rules that fail every row of a batch without their column, instead of passing it.
_FAIL_WITHOUT_COLUMN = frozenset({RuleKind.NOT_NULL, RuleKind.TYPE, RuleKind.METRIC})

DEFAULT_SQL_TIMEOUT = timedelta(seconds=DEFAULT_SQL_TIMEOUT_SECONDS)
"""The default time bound of each SQL query of a rule set over one batch."""


class RuleSet:
    """An immutable, checked set of rules (and drop rules) with one version.

    The rule-set version hashes the sorted rule ids, so it changes exactly when a rule
    is added, removed or redefined. Audit rows carry it; :meth:`manifest` is the rule
    registry that resolves it.

    Its SQL runs on the rule set's own :class:`~thalweg_bytewax.sql.engine.SqlSession`
    (an isolated DuckDB database, opened on first use), each query bounded by
    ``sql_timeout`` and the database by ``sql_memory_limit_bytes`` (no spill to
    disk). A rule whose SQL errs, is interrupted or runs past the memory limit fails
    every row of that batch (a drop rule drops nothing); each such event is counted in
    :attr:`sql_failures` and logged once per rule and cause.

    Args:
        rules: The (already merged) rules.
        drop: Drop rules.
        sql_timeout: Time bound of each SQL query over one batch, a ``timedelta``
            (``None``: no bound). Default :data:`DEFAULT_SQL_TIMEOUT` (1 s).
        sql_memory_limit_bytes: Memory limit of the rule set's DuckDB database, shared
            by its queries (at least 16 MiB). Default
            :data:`DEFAULT_SQL_MEMORY_LIMIT_BYTES`.
        sql_timeout_seconds: Deprecated: ``sql_timeout`` in seconds.

    Raises:
        ContractError: When a pattern does not compile, a rule's SQL is not exactly one
            expression (or one ``SELECT`` for a ``sql`` metric), the time bound is not
            positive or the memory limit is under 16 MiB.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        drop: Sequence[DropRule] = (),
        *,
        sql_timeout: timedelta | None | Unset = UNSET,
        sql_memory_limit_bytes: int = DEFAULT_SQL_MEMORY_LIMIT_BYTES,
        sql_timeout_seconds: float | None | Unset = UNSET,
    ) -> None:
        self.rules = tuple(rules)
        self.drop = tuple(drop)
        timeout = _timeout_seconds(sql_timeout, sql_timeout_seconds, stacklevel=4)
        check_memory_limit(
            sql_memory_limit_bytes,
            where="rule set",
            argument="sql_memory_limit_bytes",
            error=ContractError,
        )
        self.session = SqlSession(timeout, memory_limit_bytes=sql_memory_limit_bytes)
        """The rule set's own DuckDB session: where its SQL runs."""
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
        sql_timeout: timedelta | None | Unset = UNSET,
        sql_memory_limit_bytes: int = DEFAULT_SQL_MEMORY_LIMIT_BYTES,
        sql_timeout_seconds: float | None | Unset = UNSET,
    ) -> RuleSet:
        """The rule set a contract and manual rules resolve to (tightest wins).

        Manual rules on columns the contract does not declare are refused; without a
        contract, manual rules stand alone. ``sql_timeout`` (a ``timedelta``) bounds
        each SQL query over one batch and ``sql_memory_limit_bytes`` the rule set's
        database (see :class:`RuleSet`); ``sql_timeout_seconds`` is the deprecated
        name of ``sql_timeout``, in seconds.

        Raises:
            ContractError: On a rule on a missing column, SQL that does not bind, a
                pattern that does not compile or conflicting rules.
        """
        timeout = _timeout_seconds(sql_timeout, sql_timeout_seconds, stacklevel=4)
        obj = None if contract is None else contract.object(object_name)
        ruleset = cls(
            merge_rules(() if obj is None else obj.rules, rules),
            drop,
            sql_timeout=None if timeout is None else timedelta(seconds=timeout),
            sql_memory_limit_bytes=sql_memory_limit_bytes,
        )
        if contract is None or obj is None:
            return ruleset
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
        for what, rule, columns in self._rules_and_drops():
            for col in columns:
                if col not in known:
                    msg = (
                        f"{where}: {what} `{rule.name}` is on a missing column; expected one "
                        f"of {sorted(known)!r}; got {col!r}"
                    )
                    raise ContractError(msg)
            if rule.expression is not None:
                scalar = isinstance(rule, Rule) and rule.kind is RuleKind.METRIC
                try:
                    check_sql(rule.expression, schema, scalar=scalar, session=self.session)
                except ContractError as exc:
                    msg = f"{where}: {what} `{rule.name}`: {exc}"
                    raise ContractError(msg) from exc

    def sql_failed(self, rule_id: str, exc: BaseException) -> None:
        """Record that ``rule_id``'s SQL erred or timed out on a batch (count, log once)."""
        self.sql_failures[rule_id] = self.sql_failures.get(rule_id, 0) + 1
        if isinstance(exc, SqlTimeoutError):
            cause = "timeout"
            what = f"ran past {self.session.timeout_seconds} s"
        elif isinstance(exc, SqlMemoryError):
            cause = "memory"
            what = (
                f"ran past the memory limit of {format_bytes(self.session.memory_limit_bytes)} "
                f"(raise `sql_memory_limit_bytes`, or make the rule hold less)"
            )
        else:
            cause = type(exc).__name__
            what = "erred"
        if (rule_id, cause) in self._reported:
            return
        self._reported.add((rule_id, cause))
        engine = exc.__cause__ if isinstance(exc, SqlMemoryError) and exc.__cause__ else exc
        text = str(engine).strip().splitlines()[0] if str(engine).strip() else cause
        logger.warning(
            "rule set %s: rule %s failed every row of a batch: its SQL %s (%s); further "
            "batches with this outcome are counted in sql_failures, not logged",
            self.version,
            rule_id,
            what,
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
        for what, rule, columns in self._rules_and_drops():
            if isinstance(rule, Rule) and rule.kind in _FAIL_WITHOUT_COLUMN:
                continue
            for col in columns:
                if col not in names:
                    msg = (
                        f"{where}: {what} `{rule.id}` is on column {col!r}, which the batch "
                        f"lacks; expected one of {sorted(names)!r}"
                    )
                    raise ContractError(msg)

    def _rules_and_drops(self) -> Iterator[tuple[str, Rule | DropRule, tuple[str, ...]]]:
        """Each rule, then each drop rule, as messages name it, with the columns it reads."""
        for rule in self.rules:
            yield "rule", rule, rule.columns
        for drop in self.drop:
            yield "drop rule", drop, () if drop.column is None else (drop.column,)


def _timeout_seconds(
    sql_timeout: timedelta | None | Unset,
    sql_timeout_seconds: float | None | Unset,
    *,
    stacklevel: int,
) -> float | None:
    """The rule set's SQL time bound in seconds (``None``: none), the old keyword warned about.

    ``stacklevel`` counts from :func:`bound_keyword`: 4 warns at the caller of the
    function calling this one.

    Raises:
        ContractError: When both keywords are given, or the bound is not positive.
    """
    try:
        timeout = bound_keyword(
            "rule set",
            "sql_timeout",
            sql_timeout,
            "sql_timeout_seconds",
            sql_timeout_seconds,
            default=DEFAULT_SQL_TIMEOUT,
            stacklevel=stacklevel,
        )
    except ConfigError as exc:
        raise ContractError(str(exc)) from exc
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if timeout is not None and not (number and timeout > 0):
        msg = (
            "rule set: `sql_timeout_seconds` expected a positive number of seconds or None; "
            f"got {timeout!r}; pass sql_timeout=timedelta(seconds=...)"
        )
        raise ContractError(msg)
    return timeout
