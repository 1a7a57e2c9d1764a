"""The values of provisioning: a table's shape, the steps that change it, and the plan.

:func:`thalweg_bytewax.catalog.plan` computes a :class:`Plan` of these steps; the
PostgreSQL and Iceberg adapters execute them after :meth:`Plan.raise_if_refused`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TypeAlias

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.typemap import Target

__all__ = [
    "AddColumn",
    "Column",
    "CreateTable",
    "Plan",
    "Refuse",
    "SchemaEvolutionError",
    "SetComment",
    "Step",
    "TableShape",
    "WidenColumn",
]


class SchemaEvolutionError(SchemaError, ConfigError):
    """A table cannot take a batch's schema without a refused change.

    Raised by :meth:`Plan.raise_if_refused` before anything is written; the message
    names the table, each refused column, its old and new type and the remedy.
    """

    __module__ = "thalweg_bytewax.catalog"


@dataclass(frozen=True)
class Column:
    """One column of a table, in Arrow terms.

    Attributes:
        name: The column name (unquoted).
        type: The column's canonical Arrow type for the target
            (:func:`~thalweg_bytewax.typemap.canonical_type`).
        nullable: Whether NULL is allowed.
        comment: The column comment, or ``None``.
        has_default: Whether the table supplies a value when a write omits the column.
    """

    name: str
    type: pa.DataType
    nullable: bool = True
    comment: str | None = None
    has_default: bool = False


@dataclass(frozen=True)
class TableShape:
    """What a table is: its columns in order.

    Attributes:
        columns: The columns, in table order.
    """

    columns: tuple[Column, ...]

    def column(self, name: str) -> Column | None:
        """The column ``name``, or ``None``."""
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def names(self) -> tuple[str, ...]:
        """The column names in order."""
        return tuple(c.name for c in self.columns)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The columns as Arrow fields (name, type, nullability), in table order."""
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    @cached_property
    def not_null_indexes(self) -> tuple[int, ...]:
        """The positions of the NOT NULL columns."""
        return tuple(i for i, c in enumerate(self.columns) if not c.nullable)


@dataclass(frozen=True)
class CreateTable:
    """Create the absent table with these columns (comments included)."""

    table: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class AddColumn:
    """Add a nullable column (with its comment, if any)."""

    table: str
    column: Column


@dataclass(frozen=True)
class WidenColumn:
    """Change a column's type to a lossless wider one (``allow_widening=True`` only)."""

    table: str
    name: str
    old: pa.DataType
    new: pa.DataType


@dataclass(frozen=True)
class SetComment:
    """Set an existing column's comment."""

    table: str
    name: str
    comment: str


@dataclass(frozen=True)
class Refuse:
    """A change that will not be made; :attr:`message` says why and what to do."""

    table: str
    name: str
    message: str


Step: TypeAlias = CreateTable | AddColumn | WidenColumn | SetComment | Refuse
"""One step of a :class:`Plan`."""


@dataclass(frozen=True)
class Plan:
    """The changes that make a table hold a schema, as a value.

    Attributes:
        table: The table, as named to :func:`plan` (for messages and adapters).
        target: ``"postgres"`` or ``"iceberg"``.
        steps: Ordered: create or additions, widenings and comments in column order,
            then refusals of columns the batch lacks.
        result: The table's shape once every non-refused step is applied.
    """

    table: str
    target: Target
    steps: tuple[Step, ...]
    result: TableShape

    @property
    def refusals(self) -> tuple[Refuse, ...]:
        """The refused changes."""
        return tuple(s for s in self.steps if isinstance(s, Refuse))

    @property
    def changes(self) -> tuple[Step, ...]:
        """The steps to execute (everything but refusals)."""
        return tuple(s for s in self.steps if not isinstance(s, Refuse))

    def __bool__(self) -> bool:
        """Whether there is anything to do or refuse."""
        return bool(self.steps)

    def raise_if_refused(self) -> None:
        """Raise when any change is refused; call it before executing any step.

        Raises:
            SchemaEvolutionError: Naming the table and every refused column.
        """
        refused = self.refusals
        if not refused:
            return
        head = f"{self.target} table `{self.table}`: "
        if len(refused) == 1:
            msg = head + refused[0].message
        else:
            msg = head + f"{len(refused)} changes refused: " + "; ".join(r.message for r in refused)
        raise SchemaEvolutionError(msg)
