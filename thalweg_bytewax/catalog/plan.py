"""Provisioning as a plan: describe the target, compute the changes as a value, apply it.

:func:`plan` compares what a table is (a :class:`TableShape`, or ``None`` when absent)
with the Arrow schema a sink is about to write, and returns a :class:`Plan`: an
ordered tuple of steps (:class:`CreateTable`, :class:`AddColumn`, :class:`WidenColumn`,
:class:`SetComment`, :class:`Refuse`) and the shape the table has once they are
applied (those values live in :mod:`thalweg_bytewax.catalog.steps`; their old names
here still work for one release, with a ``DeprecationWarning``). The plan is
engine-agnostic and pure; the PostgreSQL and Iceberg adapters describe a table into a
:class:`TableShape` and execute the steps, after calling :meth:`Plan.raise_if_refused`,
so nothing is written when any change is refused.

The rules (docs/tables.md "Evolution"):

* absent table: create it with exactly the batch's columns;
* a new column: always added, nullable (rows already written have no value for it);
* a column whose type holds the batch's values losslessly: unchanged (the batch is
  cast at the write boundary, :func:`thalweg_bytewax.catalog.reconcile`);
* a column the batch needs wider: widened only with ``allow_widening=True`` and only
  where :func:`~thalweg_bytewax.typemap.can_widen_to` says it is lossless;
* anything else (narrowing, another type, a zone added or dropped, nested into text):
  refused, naming table, column, old and new type;
* a column the batch lacks: fine when nullable or defaulted, refused when NOT NULL;
* comments: set where the wanted comment differs; a column without a wanted comment
  keeps whatever comment it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING

import pyarrow as pa

from thalweg_bytewax._moved import moved_names
from thalweg_bytewax.catalog import steps as _steps
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns
from thalweg_bytewax.typemap import (
    Conversion,
    IdentifierMode,
    Target,
    can_widen_to,
    canonical_type,
    is_nested,
    same_type,
    target_type_name,
    validate_identifier,
)

if TYPE_CHECKING:
    from thalweg_bytewax.catalog.steps import Column, Plan, Step, TableShape

__all__ = ["builtin_comment", "plan"]

# The values of a plan lived here before they moved to `catalog.steps`; their old
# names keep working for one release, with a DeprecationWarning.
__getattr__ = moved_names(__name__, dict.fromkeys(_steps.__all__, _steps.__name__))

_EMPTY: Mapping[str, str] = MappingProxyType({})
_NO_CONVERSIONS: Mapping[str, Conversion] = MappingProxyType({})
_DESCRIPTION = b"description"


def builtin_comment(name: str, prefix: str = DEFAULT_PREFIX) -> str | None:
    """The built-in description of a metadata column, or ``None`` for other names."""
    return MetadataColumns(prefix).descriptions().get(name)


def plan(
    table: str,
    current: TableShape | None,
    desired: pa.Schema,
    *,
    target: Target,
    comments: Mapping[str, str] = _EMPTY,
    allow_widening: bool = False,
    conversions: Mapping[str, Conversion] = _NO_CONVERSIONS,
    identifiers: IdentifierMode = "strict",
    metadata_prefix: str = DEFAULT_PREFIX,
) -> Plan:
    """Compute the steps that make ``current`` hold batches of schema ``desired``.

    Pure: no I/O, the same inputs give the same plan. Every column is checked before
    anything is returned, so all refusals are known before any step runs.

    Args:
        table: The table's name as the adapter addresses it; the adapter validates and
            quotes its parts, the plan only carries it.
        current: The table as described, or ``None`` when it does not exist.
        desired: The Arrow schema of the batches about to be written.
        target: ``"postgres"`` or ``"iceberg"``.
        comments: Column comments by name; they win over a field's ``description``
            metadata (what a :class:`~thalweg_bytewax.contracts.ContractSpec` schema
            carries), which wins over the built-in ``_twg_`` descriptions.
        allow_widening: Plan lossless widenings instead of refusing them.
        conversions: Per-column opt-ins (``"truncate"`` admits nanosecond columns;
            ``"json"`` and ``"utc"`` admit writing into an existing text or zone-less
            column, done by :func:`~thalweg_bytewax.catalog.reconcile`).
        identifiers: ``"strict"`` or ``"relaxed"`` column-name validation.
        metadata_prefix: The prefix of the metadata columns with built-in comments.

    Returns:
        The plan; empty when the table already holds the schema.
    """
    builtins = MetadataColumns(metadata_prefix).descriptions()
    steps: list[Step] = []
    result: list[Column] = list(current.columns) if current is not None else []
    index = {c.name: i for i, c in enumerate(result)}
    wanted: list[Column] = []
    for f in desired:
        problem = _check_name(f.name, identifiers, target)
        if problem is None:
            try:
                ctype = canonical_type(f.type, target, conversion=conversions.get(f.name))
            except SchemaError as exc:
                problem = f"column `{f.name}`: {exc}"
        if problem is not None:
            steps.append(_steps.Refuse(table, f.name, problem))
            continue
        comment = comments.get(f.name) or _field_comment(f) or builtins.get(f.name)
        wanted.append(_steps.Column(f.name, ctype, f.nullable, comment))
    if current is None:
        creatable = tuple(wanted)
        if creatable:
            steps.insert(0, _steps.CreateTable(table, creatable))
        return _steps.Plan(table, target, tuple(steps), _steps.TableShape(creatable))
    batch_names = {f.name for f in desired}
    for want in wanted:
        i = index.get(want.name)
        if i is None:
            added = replace(want, nullable=True)
            steps.append(_steps.AddColumn(table, added))
            index[want.name] = len(result)
            result.append(added)
            continue
        have = result[i]
        step = _type_step(table, have, want, target, allow_widening, conversions)
        if step is not None:
            steps.append(step)
            if isinstance(step, _steps.WidenColumn):
                result[i] = have = replace(have, type=step.new)
        if want.comment is not None and want.comment != have.comment:
            steps.append(_steps.SetComment(table, want.name, want.comment))
            result[i] = replace(have, comment=want.comment)
    for have in current.columns:
        if have.name not in batch_names and not have.nullable and not have.has_default:
            steps.append(
                _steps.Refuse(
                    table,
                    have.name,
                    f"column `{have.name}` is NOT NULL without a default and absent from "
                    f"the batch; expected the batch to carry it; got schema "
                    f"{list(desired.names)!r}; add the column upstream or drop NOT NULL",
                )
            )
    return _steps.Plan(table, target, tuple(steps), _steps.TableShape(tuple(result)))


def _check_name(name: str, mode: IdentifierMode, target: Target) -> str | None:
    try:
        validate_identifier(name, mode=mode, target=target)
    except ConfigError as exc:
        return str(exc)
    return None


def _field_comment(f: pa.Field) -> str | None:
    if f.metadata and _DESCRIPTION in f.metadata:
        return f.metadata[_DESCRIPTION].decode("utf-8", "replace") or None
    return None


def _type_step(
    table: str,
    have: Column,
    want: Column,
    target: Target,
    allow_widening: bool,
    conversions: Mapping[str, Conversion],
) -> Step | None:
    conversion = conversions.get(want.name)
    if same_type(have.type, want.type) or can_widen_to(
        want.type, have.type, target=target, conversion=conversion
    ):
        return None
    old, new = _spell(have.type, target), _spell(want.type, target)
    if can_widen_to(have.type, want.type, target=target, conversion=conversion):
        if allow_widening:
            return _steps.WidenColumn(table, want.name, have.type, want.type)
        return _steps.Refuse(
            table,
            want.name,
            f"column `{want.name}` is `{old}`; expected the batch to fit it; got `{new}`; "
            f"the change is a lossless widening: set allow_widening=True to widen it",
        )
    if _admitted(have.type, want.type, conversion):
        return None
    return _steps.Refuse(
        table,
        want.name,
        f"column `{want.name}` is `{old}`; expected a type it holds losslessly; got "
        f"`{new}`; {_remedy(want.name, have.type, want.type)}",
    )


def _admitted(have: pa.DataType, want: pa.DataType, conversion: Conversion | None) -> bool:
    """Whether an opt-in conversion makes the write boundary handle the difference."""
    if conversion == "json":
        return pa.types.is_string(have) and _is_document(want)
    if conversion == "utc":
        return (
            pa.types.is_timestamp(have)
            and pa.types.is_timestamp(want)
            and (have.tz is None) != (want.tz is None)
        )
    return False


def _is_document(t: pa.DataType) -> bool:
    """A nested value (or a jsonb one): what the ``json`` conversion serialises."""
    return isinstance(t, pa.JsonType) or is_nested(t)


def _remedy(name: str, have: pa.DataType, want: pa.DataType) -> str:
    if pa.types.is_string(have) and _is_document(want):
        return f'opt in with conversions={{"{name}": "json"}} to write it as JSON text'
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return f'opt in with conversions={{"{name}": "utc"}} to write UTC wall-clock time'
    return "cast the column upstream, or write to a new column or table"


def _spell(t: pa.DataType, target: Target) -> str:
    try:
        return target_type_name(t, target)
    except SchemaError:
        return str(t)
