"""The resolved data contract: schema objects and their columns, rules, modes and drop rules.

This module is the engine-free half of contracts (CONVENTIONS rule 19): plain frozen
dataclasses that say *what* must hold. How a rule is evaluated over an Arrow batch lives
in :mod:`thalweg_bytewax.contracts.evaluate`; how ODCS YAML becomes a spec lives in
:mod:`thalweg_bytewax.contracts.odcs`.

What a rule says (:class:`Rule`, :class:`DropRule`, their kinds and modes) lives in
:mod:`thalweg_bytewax.contracts.rule_spec`, the errors in
:mod:`thalweg_bytewax.contracts.errors`; this module answers their names too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.contracts.errors import ContractError, ContractViolationError
from thalweg_bytewax.contracts.rule_spec import (
    ContractMode,
    DropRule,
    MetricOp,
    Rule,
    RuleKind,
    RuleOrigin,
    Severity,
)

__all__ = [
    "ColumnSpec",
    "ContractError",
    "ContractMode",
    "ContractSpec",
    "ContractViolationError",
    "DropRule",
    "MetricOp",
    "ObjectSpec",
    "Rule",
    "RuleKind",
    "RuleOrigin",
    "Severity",
]


@dataclass(frozen=True)
class ColumnSpec:
    """One top-level column of a schema object as the contract declares it.

    Attributes:
        name: The column name (the ODCS property ``name``).
        arrow_type: The resolved Arrow type.
        required: Whether nulls are forbidden.
        unique: Whether values must be unique.
        primary_key_position: 1-based position in the primary key, or ``None``.
        description: Column comment for table sinks.
        logical_type: The ODCS logical type.
        physical_type: The ODCS physical type, if given.
    """

    name: str
    arrow_type: pa.DataType
    required: bool = False
    unique: bool = False
    primary_key_position: int | None = None
    description: str | None = None
    logical_type: str | None = None
    physical_type: str | None = None


@dataclass(frozen=True)
class ObjectSpec:
    """One ODCS schema object (a table / a topic's records), resolved.

    Attributes:
        name: The object name.
        columns: Top-level columns in declaration order.
        natural_key: Columns identifying a business record (primary key, else the first
            unique column); empty when the contract declares none.
        rules: Every rule of the object, contract-derived.
        description: Object description.
    """

    name: str
    columns: tuple[ColumnSpec, ...]
    natural_key: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    description: str | None = None

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema the contract declares (required columns are non-nullable)."""
        return pa.schema(
            [
                pa.field(
                    c.name,
                    c.arrow_type,
                    nullable=not c.required,
                    metadata={"description": c.description} if c.description else None,
                )
                for c in self.columns
            ],
            metadata={"description": self.description} if self.description else None,
        )

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of the top-level columns."""
        return tuple(c.name for c in self.columns)

    def descriptions(self) -> dict[str, str]:
        """Column comments (``name -> description``) for table sinks."""
        return {c.name: c.description for c in self.columns if c.description}


@dataclass(frozen=True)
class ContractSpec:
    """A resolved data contract: one or more schema objects with their rules.

    Attributes:
        id: The contract id.
        name: The contract name.
        version: The contract's own version string.
        objects: The schema objects in declaration order.
        source: Where the contract was loaded from (for messages); a URL is kept
            redacted (userinfo, query values and fragment become ``***``).
        ignored_quality: Paths of quality entries that cannot run in a stream
            (``text``, foreign ``custom`` engines); listed, never silently dropped.
    """

    id: str | None
    name: str | None
    version: str | None
    objects: tuple[ObjectSpec, ...]
    source: str = "<memory>"
    ignored_quality: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A URL source may carry credentials (userinfo, a presigned query); the source
        # enters messages and reprs, so only its redacted form is kept.
        object.__setattr__(self, "source", redact_url(self.source))

    def object(self, name: str | None = None) -> ObjectSpec:
        """The schema object ``name``, or the only one when ``name`` is omitted.

        Raises:
            ContractError: When the object does not exist or the choice is ambiguous.
        """
        if name is None:
            if len(self.objects) == 1:
                return self.objects[0]
            msg = (
                f"contract `{self.source}`: expected an object name, the contract has "
                f"{[o.name for o in self.objects]!r}"
            )
            raise ContractError(msg)
        for obj in self.objects:
            if obj.name == name:
                return obj
        msg = (
            f"contract `{self.source}`: expected one of {[o.name for o in self.objects]!r}; "
            f"got object {name!r}"
        )
        raise ContractError(msg)

    def arrow_schema(self, object_name: str | None = None) -> pa.Schema:
        """The Arrow schema of a schema object: what codecs and file sources decode to."""
        return self.object(object_name).arrow_schema

    def natural_key(self, object_name: str | None = None) -> tuple[str, ...]:
        """The natural key of a schema object (empty when none is declared)."""
        return self.object(object_name).natural_key

    def rules(self, object_name: str | None = None) -> tuple[Rule, ...]:
        """The contract rules of a schema object."""
        return self.object(object_name).rules

    def descriptions(self, object_name: str | None = None) -> Mapping[str, str]:
        """Column comments of a schema object."""
        return self.object(object_name).descriptions()
