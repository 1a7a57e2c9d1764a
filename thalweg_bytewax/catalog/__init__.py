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

from thalweg_bytewax._lazy import export_reexports

from .plan import builtin_comment as builtin_comment
from .plan import plan as plan
from .reconcile import WriteBoundaryError as WriteBoundaryError
from .reconcile import reconcile as reconcile
from .reconcile import to_json_text as to_json_text
from .steps import AddColumn as AddColumn
from .steps import Column as Column
from .steps import CreateTable as CreateTable
from .steps import Plan as Plan
from .steps import Refuse as Refuse
from .steps import SchemaEvolutionError as SchemaEvolutionError
from .steps import SetComment as SetComment
from .steps import Step as Step
from .steps import TableShape as TableShape
from .steps import WidenColumn as WidenColumn

export_reexports(globals())
