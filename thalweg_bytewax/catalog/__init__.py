"""Provisioning of table targets: describe, plan, apply, and reconcile at the write boundary.

Engine-agnostic here; the PostgreSQL and Iceberg adapters describe a live table into a
:class:`TableShape`, call :func:`plan`, then :meth:`Plan.raise_if_refused` and execute
the steps. Types come from :mod:`thalweg_bytewax.typemap`.

Examples:
    >>> import pyarrow as pa
    >>> from thalweg_bytewax.catalog import plan
    >>> p = plan("orders", None, pa.schema([("id", pa.int64())]), target="postgres")
    >>> [type(s).__name__ for s in p.steps]
    ['CreateTable']
    >>> plan("orders", p.result, pa.schema([("id", pa.int32())]), target="postgres").steps
    ()
"""

from __future__ import annotations

from thalweg_bytewax.catalog.plan import builtin_comment, plan
from thalweg_bytewax.catalog.reconcile import WriteBoundaryError, reconcile, to_json_text
from thalweg_bytewax.catalog.steps import (
    AddColumn,
    Column,
    CreateTable,
    Plan,
    Refuse,
    SchemaEvolutionError,
    SetComment,
    Step,
    TableShape,
    WidenColumn,
)

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
    "WriteBoundaryError",
    "builtin_comment",
    "plan",
    "reconcile",
    "to_json_text",
]
