"""Built-in rules as named constructors, and the tightest-wins merge.

``Rule.not_null("id")``, ``Rule.between("total", 0, 10_000)``, ``Rule.one_of("status",
[...])`` ... build :class:`~thalweg_bytewax.contracts.spec.Rule` values (pandera style).
:func:`merge_rules` combines contract and manual rules: a manual and a contract rule on
the same field resolve to the tighter of the two, so neither source can loosen the other
(ADR-0016/0036).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from thalweg_bytewax.contracts.spec import Rule

__all__ = ["RuleConstructors", "merge_rules"]


def _stable_key(value: Any) -> tuple[str, str]:
    return (json.dumps(value, sort_keys=True, default=str), type(value).__qualname__)


def stable_values(values: Iterable[Any]) -> tuple[Any, ...]:
    """``values`` as a tuple whose order does not depend on the process.

    A set iterates in hash order, which for strings changes with ``PYTHONHASHSEED``; it
    is sorted by a canonical text key so that the rule version hashed from it is the
    same in every process. Sequences keep their order.
    """
    if isinstance(values, (set, frozenset)):
        return tuple(sorted(values, key=_stable_key))
    return tuple(values)


class RuleConstructors:
    """Named constructors mixed into :class:`~thalweg_bytewax.contracts.spec.Rule`."""

    if TYPE_CHECKING:
        # The dataclass that mixes these in supplies the real keyword constructor.
        def __init__(self, **fields: Any) -> None: ...

    @classmethod
    def not_null(cls, column: str, *, name: str = "") -> Self:
        """``column`` must not be null (ODCS ``required``)."""
        return cls(kind="not_null", columns=(column,), name=name)

    @classmethod
    def of_type(cls, column: str, arrow_type: str, *, name: str = "") -> Self:
        """``column`` must be present and its values castable to ``arrow_type``."""
        return cls(kind="type", columns=(column,), arrow_type=arrow_type, name=name)

    @classmethod
    def unique(cls, *columns: str, window: timedelta | None = None, name: str = "") -> Self:
        """Values of ``columns`` must be unique in a batch, and over ``window`` if given."""
        return cls(kind="unique", columns=columns, window=window, name=name)

    @classmethod
    def one_of(cls, column: str, values: Iterable[Any], *, name: str = "") -> Self:
        """``column`` must be one of ``values`` (ODCS ``enum``); nulls pass."""
        return cls(
            kind="allowed_values", columns=(column,), values=stable_values(values), name=name
        )

    @classmethod
    def between(
        cls,
        column: str,
        min: Any = None,  # noqa: A002 - mirrors the ODCS vocabulary
        max: Any = None,  # noqa: A002
        *,
        min_inclusive: bool = True,
        max_inclusive: bool = True,
        name: str = "",
    ) -> Self:
        """``min <= column <= max`` (each bound optional, each inclusive or exclusive)."""
        return cls(
            kind="range",
            columns=(column,),
            min=min,
            max=max,
            min_inclusive=min_inclusive,
            max_inclusive=max_inclusive,
            name=name,
        )

    @classmethod
    def ge(cls, column: str, value: Any, *, name: str = "") -> Self:
        """``column >= value``."""
        return cls.between(column, value, None, name=name)

    @classmethod
    def gt(cls, column: str, value: Any, *, name: str = "") -> Self:
        """``column > value``."""
        return cls.between(column, value, None, min_inclusive=False, name=name)

    @classmethod
    def le(cls, column: str, value: Any, *, name: str = "") -> Self:
        """``column <= value``."""
        return cls.between(column, None, value, name=name)

    @classmethod
    def lt(cls, column: str, value: Any, *, name: str = "") -> Self:
        """``column < value``."""
        return cls.between(column, None, value, max_inclusive=False, name=name)

    @classmethod
    def length(
        cls,
        column: str,
        min: int | None = None,
        max: int | None = None,
        *,
        name: str = "",  # noqa: A002
    ) -> Self:
        """The string length of ``column`` must lie in ``[min, max]``."""
        return cls(kind="length", columns=(column,), min_length=min, max_length=max, name=name)

    @classmethod
    def matches(cls, column: str, pattern: str, *, name: str = "") -> Self:
        """``column`` must contain a match of the RE2 ``pattern`` (anchor it with ^...$)."""
        return cls(kind="pattern", columns=(column,), pattern=pattern, name=name)

    @classmethod
    def sql(cls, name: str, expression: str) -> Self:
        """The DuckDB predicate ``expression`` must not be false for a row.

        NULL passes, as in a SQL ``CHECK`` constraint.
        """
        return cls(kind="sql", expression=expression, name=name)

    @classmethod
    def batch_metric(
        cls,
        metric: str,
        *columns: str,
        op: str,
        threshold: Any,
        unit: str = "rows",
        values: Iterable[Any] | None = None,
        pattern: str | None = None,
        expression: str | None = None,
        name: str = "",
    ) -> Self:
        """A batch-level ODCS metric with a threshold, e.g. ``nullValues <= 1 percent``.

        Args:
            metric: ``nullValues``, ``missingValues``, ``invalidValues``,
                ``duplicateValues``, ``rowCount`` or ``sql``.
            *columns: The column(s) measured (none for ``rowCount`` / ``sql``).
            op: An ODCS operator name (``mustBeLessOrEqualTo`` ...).
            threshold: The bound (a pair for the between operators).
            unit: ``rows`` or ``percent``.
            values: Valid values (``invalidValues``) or missing markers (``missingValues``).
            pattern: Valid-value pattern (``invalidValues``).
            expression: The scalar SQL query (``sql``), over table ``batch``.
            name: Rule name.
        """
        return cls(
            kind="metric",
            columns=columns,
            metric=metric,
            op=op,
            threshold=tuple(threshold) if isinstance(threshold, list) else threshold,
            unit=unit,
            values=stable_values(values) if values is not None else None,
            pattern=pattern,
            expression=expression,
            name=name,
        )


def _tighter_lower(a: tuple[Any, bool], b: tuple[Any, bool]) -> tuple[Any, bool]:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    if a[0] != b[0]:
        return a if a[0] > b[0] else b
    return (a[0], a[1] and b[1])  # at equal bounds exclusive is tighter


def _tighter_upper(a: tuple[Any, bool], b: tuple[Any, bool]) -> tuple[Any, bool]:
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    if a[0] != b[0]:
        return a if a[0] < b[0] else b
    return (a[0], a[1] and b[1])


def _max_opt(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _merge_pair(a: Rule, b: Rule) -> Rule:
    """Resolve two rules of one kind on one field to the tighter one."""
    from dataclasses import replace  # noqa: PLC0415

    from thalweg_bytewax.contracts.spec import ContractError, RuleKind, RuleOrigin  # noqa: PLC0415

    kind = a.kind
    merged: Rule
    if kind in (RuleKind.NOT_NULL,):
        merged = a
    elif kind is RuleKind.UNIQUE:
        window = (
            a.window
            if b.window is None
            else b.window
            if a.window is None
            else max(a.window, b.window)
        )
        merged = replace(a, window=window)
    elif kind is RuleKind.TYPE:
        if a.arrow_type != b.arrow_type:
            msg = (
                f"rule `{a.name}`: two type rules on `{a.columns[0]}` disagree; expected one "
                f"type, got {a.arrow_type!r} and {b.arrow_type!r}"
            )
            raise ContractError(msg)
        merged = a
    elif kind is RuleKind.ALLOWED_VALUES:
        other = set(b.values or ())
        merged = replace(a, values=tuple(v for v in (a.values or ()) if v in other))
    elif kind is RuleKind.RANGE:
        try:
            lo = _tighter_lower((a.min, a.min_inclusive), (b.min, b.min_inclusive))
            hi = _tighter_upper((a.max, a.max_inclusive), (b.max, b.max_inclusive))
        except TypeError as exc:
            msg = (
                f"rule `{a.name}`: bounds on `{a.columns[0]}` are not comparable; got "
                f"{a.min!r}..{a.max!r} and {b.min!r}..{b.max!r}"
            )
            raise ContractError(msg) from exc
        merged = replace(a, min=lo[0], min_inclusive=lo[1], max=hi[0], max_inclusive=hi[1])
    elif kind is RuleKind.LENGTH:
        merged = replace(
            a,
            min_length=_max_opt(a.min_length, b.min_length),
            max_length=_min_opt(a.max_length, b.max_length),
        )
    else:  # pragma: no cover - conjunctive kinds never reach here
        msg = f"rule `{a.name}`: kind {kind!s} does not merge"
        raise ContractError(msg)
    if merged.version == a.version:
        return a
    if merged.version == b.version:
        return b
    return replace(merged, origin=RuleOrigin.MERGED)


def merge_rules(contract: Iterable[Rule], manual: Iterable[Rule] = ()) -> tuple[Rule, ...]:
    """Merge contract and manual rules, tightest wins.

    Rules of the same kind on the same column(s) collapse into one rule that accepts a
    value only if *every* one of them accepts it: the larger lower bound, the smaller
    upper bound (exclusive beats inclusive at the same bound), the intersection of
    allowed values, the stricter lengths, the longer uniqueness window. Patterns, SQL
    predicates and batch metrics are kept side by side (each must hold), which is the
    tightest combination for them. The result does not depend on argument order.

    Args:
        contract: Rules from the contract.
        manual: Rules from configuration.

    Returns:
        The merged rules, contract order first; ids are unique.

    Raises:
        ContractError: When two rules cannot both hold by construction (two different
            declared types for one column) or their bounds are not comparable.
    """
    from thalweg_bytewax.contracts.spec import RuleKind  # noqa: PLC0415

    mergeable = {
        RuleKind.NOT_NULL,
        RuleKind.UNIQUE,
        RuleKind.TYPE,
        RuleKind.ALLOWED_VALUES,
        RuleKind.RANGE,
        RuleKind.LENGTH,
    }
    out: dict[tuple[Any, ...], Rule] = {}
    for rule in (*contract, *manual):
        key: tuple[Any, ...] = (
            (rule.kind, rule.columns) if rule.kind in mergeable else (rule.kind, rule.id)
        )
        out[key] = _merge_pair(out[key], rule) if key in out else rule
    # Distinct definitions that happen to share a name get distinct names, so that a
    # rule id always identifies one definition within a rule set.
    seen: dict[str, int] = {}
    result: list[Rule] = []
    for rule in out.values():
        n = seen.get(rule.name, 0)
        seen[rule.name] = n + 1
        if n:
            from dataclasses import replace  # noqa: PLC0415

            rule = replace(rule, name=f"{rule.name}_{n + 1}")  # noqa: PLW2901
        result.append(rule)
    return tuple(result)
