"""What a rule says: its kind, origin and threshold operator, :class:`Rule` and :class:`DropRule`.

A rule's identity is ``name@version``: the name is stable and human (``total_range``),
the version is a short hash of the rule's definition, so any change to what the rule
checks gives a new version and earlier verdicts stay attributable to the old one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pyarrow as pa

from thalweg_bytewax.contracts.errors import ContractError
from thalweg_bytewax.contracts.rules import RuleConstructors, stable_values

__all__ = [
    "RULE_VERSION_CHARS",
    "ContractMode",
    "DropRule",
    "MetricOp",
    "Rule",
    "RuleKind",
    "RuleOrigin",
    "Severity",
    "parse_severity",
]

RULE_VERSION_CHARS = 8
"""Hex characters of a rule or rule-set version (32 bits: distinct definitions of one
rule name colliding is what matters, not global uniqueness)."""


class ContractMode(StrEnum):
    """What :func:`thalweg_bytewax.operators.validate` does with a violating record."""

    STRICT = "strict"
    """Fail the flow on the first violating batch."""
    QUARANTINE = "quarantine"
    """Divert violating rows to the DLQ and pass the rest."""
    ANNOTATE = "annotate"
    """Pass every row, adding a column with the rules it failed."""


class RuleKind(StrEnum):
    """What a rule checks. The values are stable (they enter rule versions)."""

    NOT_NULL = "not_null"
    TYPE = "type"
    UNIQUE = "unique"
    ALLOWED_VALUES = "allowed_values"
    RANGE = "range"
    LENGTH = "length"
    PATTERN = "pattern"
    SQL = "sql"
    METRIC = "metric"


class RuleOrigin(StrEnum):
    """Where a rule came from; not part of its version."""

    CONTRACT = "contract"
    MANUAL = "manual"
    MERGED = "merged"


class Severity(StrEnum):
    """What a failure of a rule does (the ODCS quality ``severity``).

    ``error`` (the default, also when a contract gives no severity) rejects the failing
    rows; ``warning`` and ``info`` are evaluated the same way but never reject a row:
    their failures are reported (audit, metrics, a rate-limited log line) and the rows
    pass on.
    """

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rejects(self) -> bool:
        """Whether a failure of a rule of this severity rejects the row."""
        return self is Severity.ERROR


def parse_severity(value: Any, *, rule: str) -> Severity:
    """``value`` as a :class:`Severity`, matched case-insensitively; ``None`` is ``error``.

    Raises:
        ContractError: Naming ``rule`` and the allowed values, for any other value.
    """
    if value is None:
        return Severity.ERROR
    if isinstance(value, Severity):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    try:
        return Severity(text)
    except ValueError:
        allowed = [str(s) for s in Severity]
        msg = (
            f"rule `{rule}`: unknown severity {value!r}; expected one of {allowed!r} "
            "(case-insensitive; absent means error)"
        )
        raise ContractError(msg) from None


class MetricOp(StrEnum):
    """ODCS comparison operators of a batch metric threshold."""

    MUST_BE = "mustBe"
    MUST_NOT_BE = "mustNotBe"
    GT = "mustBeGreaterThan"
    GE = "mustBeGreaterOrEqualTo"
    LT = "mustBeLessThan"
    LE = "mustBeLessOrEqualTo"
    BETWEEN = "mustBeBetween"
    NOT_BETWEEN = "mustNotBeBetween"


# Schema conformance goes to the DLQ as `contract`; value and quality rules as `dq`.
_CONTRACT_KINDS = frozenset({RuleKind.NOT_NULL, RuleKind.TYPE})


def _canonical(value: Any) -> Any:
    """A JSON-ready, order-stable form of a rule parameter (for hashing and manifests)."""
    if isinstance(value, (list, tuple, frozenset, set)):
        items = [_canonical(v) for v in value]
        if isinstance(value, (frozenset, set)):
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (datetime, date, time)):
        return {type(value).__name__: value.isoformat()}
    if isinstance(value, timedelta):
        return {"seconds": value.total_seconds()}
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, pa.DataType):
        return str(value)
    return value


@dataclass(frozen=True)
class Rule(RuleConstructors):
    """One expectation about the records of a schema object.

    Build rules with the named constructors in :mod:`thalweg_bytewax.contracts.rules`
    (``Rule.not_null("id")``, ``Rule.between("total", 0, 10_000)`` ...) rather than by
    hand. Row rules fail individual records; ``metric`` rules judge a whole batch and,
    when they fail, fail the records that caused the failure (see
    :func:`~thalweg_bytewax.contracts.kernels.metric_rule_mask`). A failure rejects the
    record only when the rule's ``severity`` is ``error``.

    Attributes:
        kind: What the rule checks.
        columns: The column(s) checked; empty for row SQL predicates and ``rowCount``.
        name: The stable rule name; defaults to ``<column>_<kind>``.
        origin: Contract, manual or merged (informational; not versioned).
        values: Allowed values (``allowed_values``; ``invalidValues`` valid values).
        min: Lower bound (``range``).
        max: Upper bound (``range``).
        min_inclusive: Whether ``min`` itself passes.
        max_inclusive: Whether ``max`` itself passes.
        min_length: Minimum string length (``length``).
        max_length: Maximum string length (``length``).
        pattern: An RE2 regular expression a value must contain a match of.
        arrow_type: The declared Arrow type (``type``); its text form enters the version.
        expression: A DuckDB SQL expression: a row predicate (``sql``) or a scalar batch
            query (``metric`` with ``metric="sql"``).
        metric: ODCS metric for batch rules: ``nullValues``, ``missingValues``,
            ``invalidValues``, ``duplicateValues``, ``rowCount`` or ``sql``.
        op: The metric threshold operator.
        threshold: The metric threshold (a number, or a pair for between operators).
        unit: ``rows`` or ``percent``.
        window: For ``unique``: also unique over this time window across batches.
        severity: ``error`` (default) rejects failing rows; ``warning`` and ``info``
            report failures and reject nothing. Part of the version unless ``error``,
            so the ids of rules declared without a severity do not change.
        description: Free text, for people.
    """

    kind: RuleKind
    columns: tuple[str, ...] = ()
    name: str = ""
    origin: RuleOrigin = RuleOrigin.MANUAL
    values: tuple[Any, ...] | None = None
    min: Any = None
    max: Any = None
    min_inclusive: bool = True
    max_inclusive: bool = True
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    arrow_type: pa.DataType | str | None = None
    expression: str | None = None
    metric: str | None = None
    op: MetricOp | None = None
    threshold: Any = None
    unit: str = "rows"
    window: timedelta | None = None
    severity: Severity = Severity.ERROR
    description: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", RuleKind(self.kind))
        object.__setattr__(self, "columns", tuple(self.columns))
        if self.values is not None:
            object.__setattr__(self, "values", stable_values(self.values))
        # An absent bound has no inclusivity: keep equal definitions equal (and versioned
        # the same) however they were spelled.
        if self.min is None:
            object.__setattr__(self, "min_inclusive", True)
        if self.max is None:
            object.__setattr__(self, "max_inclusive", True)
        if not self.name:
            stem = "_".join(self.columns) if self.columns else "row"
            suffix = self.metric if self.kind is RuleKind.METRIC else str(self.kind)
            object.__setattr__(self, "name", f"{stem}_{suffix}")
        object.__setattr__(self, "severity", parse_severity(self.severity, rule=self.name))

    @property
    def column(self) -> str | None:
        """The single column the rule checks, or ``None``."""
        return self.columns[0] if len(self.columns) == 1 else None

    @property
    def is_batch_rule(self) -> bool:
        """Whether the rule judges whole batches (an ODCS metric) rather than rows."""
        return self.kind is RuleKind.METRIC

    @property
    def reason(self) -> str:
        """The DLQ reason code of a failure: ``contract`` (schema) or ``dq`` (quality)."""
        return "contract" if self.kind in _CONTRACT_KINDS else "dq"

    def definition(self) -> dict[str, Any]:
        """What the rule checks, canonically: the input of :attr:`version`."""
        out: dict[str, Any] = {"kind": str(self.kind), "columns": list(self.columns)}
        for name in (
            "values",
            "min",
            "max",
            "min_length",
            "max_length",
            "pattern",
            "arrow_type",
            "expression",
            "metric",
            "op",
            "threshold",
            "window",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = _canonical(value)
        if self.kind is RuleKind.RANGE:
            out["min_inclusive"] = self.min_inclusive
            out["max_inclusive"] = self.max_inclusive
        if self.kind is RuleKind.METRIC:
            out["unit"] = self.unit
        # Absent for the default, so rules without a severity keep their versions.
        if self.severity is not Severity.ERROR:
            out["severity"] = str(self.severity)
        return out

    @property
    def version(self) -> str:
        """A short hash of :meth:`definition`; changes whenever what is checked changes."""
        text = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:RULE_VERSION_CHARS]

    @property
    def id(self) -> str:
        """``name@version``: how DLQ rows and the audit refer to the rule."""
        return f"{self.name}@{self.version}"

    def describe(self) -> str:
        """A short human rendering of the rule, for messages."""
        col = ", ".join(self.columns)
        match self.kind:
            case RuleKind.NOT_NULL:
                return f"`{col}` not null"
            case RuleKind.TYPE:
                return f"`{col}` of type {self.arrow_type}"
            case RuleKind.UNIQUE:
                return f"`{col}` unique" + (f" within {self.window}" if self.window else "")
            case RuleKind.ALLOWED_VALUES:
                return f"`{col}` one of {list(self.values or ())!r}"
            case RuleKind.RANGE:
                lo = (
                    ""
                    if self.min is None
                    else f"{self.min!s} {'<=' if self.min_inclusive else '<'} "
                )
                hi = (
                    ""
                    if self.max is None
                    else f" {'<=' if self.max_inclusive else '<'} {self.max!s}"
                )
                return f"{lo}`{col}`{hi}"
            case RuleKind.LENGTH:
                return f"length of `{col}` in [{self.min_length}, {self.max_length}]"
            case RuleKind.PATTERN:
                return f"`{col}` matching {self.pattern!r}"
            case RuleKind.SQL:
                return f"`{self.expression}` to hold"
            case _:
                return f"{self.metric} of `{col or '*'}` {self.op} {self.threshold!r} ({self.unit})"


@dataclass(frozen=True)
class DropRule:
    """Known junk to discard before validation: heartbeats, test traffic.

    A row is dropped when it *matches*: ``column`` holds one of ``values``, or the DuckDB
    ``expression`` is true. Dropped rows never reach the DLQ; they are silent unless
    ``audit`` is set, in which case each one gets an audit row with verdict ``drop``.

    Attributes:
        name: Stable name, part of the drop rule's id.
        column: The column compared with ``values``.
        values: Values that mark a row as junk.
        expression: A DuckDB SQL predicate that marks a row as junk.
        audit: Record dropped rows in the audit stream (opt-in).
    """

    name: str
    column: str | None = None
    values: tuple[Any, ...] | None = None
    expression: str | None = None
    audit: bool = False

    def __post_init__(self) -> None:
        if (self.values is None) == (self.expression is None) or (
            self.values is not None and not self.column
        ):
            msg = (
                f"drop rule `{self.name}`: expected either `column` with `values` or an "
                f"`expression`; got column={self.column!r}, values={self.values!r}, "
                f"expression={self.expression!r}"
            )
            raise ContractError(msg)
        if self.values is not None:
            object.__setattr__(self, "values", stable_values(self.values))

    @classmethod
    def equals(
        cls, name: str, column: str, values: Iterable[Any], *, audit: bool = False
    ) -> DropRule:
        """Drop rows whose ``column`` is one of ``values``."""
        return cls(name=name, column=column, values=stable_values(values), audit=audit)

    @classmethod
    def sql(cls, name: str, expression: str, *, audit: bool = False) -> DropRule:
        """Drop rows for which the DuckDB predicate ``expression`` is true."""
        return cls(name=name, expression=expression, audit=audit)

    @property
    def id(self) -> str:
        """``drop:name@version``."""
        body = json.dumps(
            {"column": self.column, "values": _canonical(self.values), "sql": self.expression},
            sort_keys=True,
            default=str,
        )
        return f"drop:{self.name}@{hashlib.sha256(body.encode()).hexdigest()[:RULE_VERSION_CHARS]}"
