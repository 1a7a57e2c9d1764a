"""The tightest-wins merge of contract and manual rules (ADR-0016/0036).

A manual and a contract rule on the same field resolve to the tighter of the two, so
neither source can loosen the other.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from thalweg_bytewax.contracts.spec import ContractError, Rule, RuleKind, RuleOrigin

__all__ = ["merge_rules"]


def _tighter(
    a: tuple[Any, bool], b: tuple[Any, bool], inner: Callable[[Any, Any], bool]
) -> tuple[Any, bool]:
    """The tighter of two ``(bound, inclusive)`` bounds; a ``None`` bound is no bound.

    Args:
        a: One bound.
        b: The other.
        inner: True when its first value is the tighter bound: ``operator.gt`` for
            lower bounds, ``operator.lt`` for upper ones.
    """
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    if a[0] != b[0]:
        return a if inner(a[0], b[0]) else b
    return (a[0], a[1] and b[1])  # at equal bounds exclusive is tighter


def _max_opt(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _merge_pair(a: Rule, b: Rule) -> Rule:
    """Resolve two rules of one kind on one field to the tighter one."""
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
            lo = _tighter((a.min, a.min_inclusive), (b.min, b.min_inclusive), operator.gt)
            hi = _tighter((a.max, a.max_inclusive), (b.max, b.max_inclusive), operator.lt)
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
            # A warning never tightens an error rule (nor the reverse): severities apart.
            (rule.kind, rule.columns, rule.severity)
            if rule.kind in mergeable
            else (rule.kind, rule.id)
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
            rule = replace(rule, name=f"{rule.name}_{n + 1}")  # noqa: PLW2901
        result.append(rule)
    return tuple(result)
