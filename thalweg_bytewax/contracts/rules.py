"""Built-in rules as named constructors.

``Rule.not_null("id")``, ``Rule.between("total", 0, 10_000)``, ``Rule.one_of("status",
[...])`` ... build :class:`~thalweg_bytewax.contracts.spec.Rule` values (pandera style).
:class:`RuleConstructors` is mixed into ``Rule``, so this module sits below
:mod:`~thalweg_bytewax.contracts.rule_spec` and imports nothing of it: the constructors
build ``cls(...)`` from plain field values, which ``Rule`` normalises.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

__all__ = ["RuleConstructors", "stable_values"]


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
    def _on_column(cls, kind: str, column: str, name: str, severity: str, **fields: Any) -> Self:
        """A rule of ``kind`` on the one ``column``, with the fields of that kind."""
        return cls(kind=kind, columns=(column,), name=name, severity=severity, **fields)

    @classmethod
    def not_null(cls, column: str, *, name: str = "", severity: str = "error") -> Self:
        """``column`` must not be null (ODCS ``required``)."""
        return cls._on_column("not_null", column, name, severity)

    @classmethod
    def of_type(
        cls, column: str, arrow_type: str, *, name: str = "", severity: str = "error"
    ) -> Self:
        """``column`` must be present and its values castable to ``arrow_type``."""
        return cls._on_column("type", column, name, severity, arrow_type=arrow_type)

    @classmethod
    def unique(
        cls, *columns: str, window: timedelta | None = None, name: str = "", severity: str = "error"
    ) -> Self:
        """Values of ``columns`` must be unique in a batch, and over ``window`` if given."""
        return cls(kind="unique", columns=columns, window=window, name=name, severity=severity)

    @classmethod
    def one_of(
        cls, column: str, values: Iterable[Any], *, name: str = "", severity: str = "error"
    ) -> Self:
        """``column`` must be one of ``values`` (ODCS ``enum``); nulls pass."""
        return cls._on_column(
            "allowed_values", column, name, severity, values=stable_values(values)
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
        severity: str = "error",
    ) -> Self:
        """``min <= column <= max`` (each bound optional, each inclusive or exclusive)."""
        return cls._on_column(
            "range",
            column,
            name,
            severity,
            min=min,
            max=max,
            min_inclusive=min_inclusive,
            max_inclusive=max_inclusive,
        )

    @classmethod
    def ge(cls, column: str, value: Any, *, name: str = "", severity: str = "error") -> Self:
        """``column >= value``."""
        return cls.between(column, value, None, name=name, severity=severity)

    @classmethod
    def gt(cls, column: str, value: Any, *, name: str = "", severity: str = "error") -> Self:
        """``column > value``."""
        return cls.between(column, value, None, min_inclusive=False, name=name, severity=severity)

    @classmethod
    def le(cls, column: str, value: Any, *, name: str = "", severity: str = "error") -> Self:
        """``column <= value``."""
        return cls.between(column, None, value, name=name, severity=severity)

    @classmethod
    def lt(cls, column: str, value: Any, *, name: str = "", severity: str = "error") -> Self:
        """``column < value``."""
        return cls.between(column, None, value, max_inclusive=False, name=name, severity=severity)

    @classmethod
    def length(
        cls,
        column: str,
        min: int | None = None,
        max: int | None = None,
        *,
        name: str = "",  # noqa: A002
        severity: str = "error",
    ) -> Self:
        """The string length of ``column`` must lie in ``[min, max]``."""
        return cls._on_column("length", column, name, severity, min_length=min, max_length=max)

    @classmethod
    def matches(cls, column: str, pattern: str, *, name: str = "", severity: str = "error") -> Self:
        """``column`` must contain a match of the RE2 ``pattern`` (anchor it with ^...$)."""
        return cls._on_column("pattern", column, name, severity, pattern=pattern)

    @classmethod
    def sql(cls, name: str, expression: str, *, severity: str = "error") -> Self:
        """The DuckDB predicate ``expression`` must not be false for a row.

        NULL passes, as in a SQL ``CHECK`` constraint.
        """
        return cls(kind="sql", expression=expression, name=name, severity=severity)

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
        severity: str = "error",
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
            severity: ``error`` (rejects the failing rows), ``warning`` or ``info``
                (reports them, rejects nothing).
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
            severity=severity,
        )
