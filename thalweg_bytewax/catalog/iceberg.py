"""Iceberg provisioning: describe a pyiceberg table, apply a plan, keep the partition spec.

The engine adapter of :mod:`thalweg_bytewax.catalog.plan` for Iceberg. :func:`describe`
turns a table's current schema into a :class:`~thalweg_bytewax.catalog.steps.TableShape`
(types through :mod:`thalweg_bytewax.typemap`); :func:`provision` plans the change a
batch schema needs, refuses before anything is written when any change is refused, and
applies the rest:

* ``CreateTable`` → ``catalog.create_table`` with every column's doc (comment) and
  :data:`CREATED_TABLE_PROPERTIES`, then the configured partition spec;
* ``AddColumn`` → ``update_schema().add_column(name, type, doc=...)`` (always optional);
* ``WidenColumn`` → ``update_column(name, field_type=...)`` (``int → long``,
  ``float → double``, decimal precision; only with ``allow_widening``);
* ``SetComment`` → ``update_column(name, doc=...)``.

All schema steps of one plan go in one ``update_schema()`` commit. Evolution is decided
once per new batch schema, never by ``union_by_name`` per batch. A commit that loses a
race with another writer (``CommitFailedException``) is retried on the refreshed table,
re-planned from what that writer left.

Partition specs are configured as :class:`PartitionField` values (``"region"``,
``"day(created_at)"``, ``"bucket(16, id)"``, see :func:`parse_partition_spec`); a
field the table lacks is added with ``update_spec()``; fields the table has beyond the
configuration are kept (removing one is a deliberate, manual step).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from thalweg_bytewax._deps import require
from thalweg_bytewax.catalog.plan import plan
from thalweg_bytewax.catalog.steps import (
    AddColumn,
    Column,
    CreateTable,
    Plan,
    SetComment,
    TableShape,
    WidenColumn,
)
from thalweg_bytewax.errors import ConfigError, SinkTerminalError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX
from thalweg_bytewax.typemap import IdentifierMode, arrow_type_of_iceberg, iceberg_type

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = [
    "CREATED_TABLE_PROPERTIES",
    "PartitionField",
    "apply_partition_spec",
    "describe",
    "parse_partition_spec",
    "provision",
]

logger = logging.getLogger(__name__)

_DOC = b"doc"  # the Arrow field metadata key pyiceberg reads a column doc from
# Conflicting schema commits are rare (two shards meeting a new field in one epoch);
# a few refreshed retries settle them.
_SCHEMA_RETRIES = 5


def describe(table: Table) -> TableShape:
    """The shape of a pyiceberg table: its top-level columns in order, with their docs.

    Raises:
        SchemaError: A column's type is outside the vocabulary thalweg writes.
    """
    return TableShape(
        tuple(
            Column(
                f.name,
                arrow_type_of_iceberg(f.field_type),
                nullable=not f.required,
                comment=f.doc,
                has_default=f.write_default is not None,
            )
            for f in table.schema().fields
        )
    )


def provision(  # noqa: PLR0913 - every argument is a documented knob of the plan
    catalog: Catalog,
    identifier: str,
    schema: pa.Schema,
    *,
    comments: Mapping[str, str] | None = None,
    allow_widening: bool = False,
    partition_by: Sequence[PartitionField] = (),
    identifiers: IdentifierMode = "strict",
    metadata_prefix: str = DEFAULT_PREFIX,
) -> tuple[Table, Plan]:
    """Make the table ``identifier`` hold batches of ``schema``: create or evolve it.

    Args:
        catalog: The pyiceberg catalog.
        identifier: ``namespace.table`` (the namespace is created when absent).
        schema: The Arrow schema of the batches about to be written.
        comments: Column docs by name (over field ``description`` metadata and the
            built-in ``_twg_`` descriptions).
        allow_widening: Widen columns losslessly (``int → long``) instead of refusing.
        partition_by: The partition spec to create the table with (or add to it).
        identifiers: ``"strict"`` (``[a-z_][a-z0-9_]*``) or ``"relaxed"`` column names.
        metadata_prefix: The prefix of the metadata columns with built-in docs.

    Returns:
        The (refreshed) table and the plan that was applied (empty when nothing changed).

    Raises:
        SchemaEvolutionError: A change is refused; nothing was changed or written.
    """
    nse = require("pyiceberg.exceptions", extra="iceberg")
    for attempt in range(_SCHEMA_RETRIES):
        try:
            table: Table | None = catalog.load_table(identifier)
        except nse.NoSuchTableError:
            table = None
        current = describe(table) if table is not None else None
        steps = plan(
            identifier,
            current,
            schema,
            target="iceberg",
            comments=comments or {},
            allow_widening=allow_widening,
            identifiers=identifiers,
            metadata_prefix=metadata_prefix,
        )
        steps.raise_if_refused()
        try:
            if table is None:
                table = _create(catalog, identifier, steps)
            elif steps.changes:
                _evolve(table, steps)
                table = table.refresh()
        except (nse.CommitFailedException, nse.TableAlreadyExistsError):
            time.sleep(0.05 * (attempt + 1))
            continue  # another writer moved the table: describe and plan again
        if partition_by:
            apply_partition_spec(table, partition_by)
        if steps.changes:
            logger.info(
                "iceberg table `%s`: applied %s (%s)",
                identifier,
                ", ".join(type(s).__name__ for s in steps.changes),
                ", ".join(_step_column(s) for s in steps.changes),
            )
        return table, steps
    msg = (
        f"iceberg table `{identifier}`: the schema change lost {_SCHEMA_RETRIES} commit races "
        f"with other writers; expected the table to settle; retry the flow"
    )
    raise SinkTerminalError(msg)


def _step_column(step: object) -> str:
    if isinstance(step, CreateTable):
        return f"{len(step.columns)} columns"
    if isinstance(step, AddColumn):
        return step.column.name
    return str(getattr(step, "name", ""))


def _ensure_namespace(catalog: Catalog, namespace: str) -> None:
    """Create ``namespace`` unless it exists, also when another writer creates it at once.

    Two shards of a sink on a fresh warehouse create the namespace together; the SQL
    catalog reports the loser as a unique-constraint error from its database, not as
    "already exists". The namespace existing afterwards is what counts.
    """
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not _namespace_exists(catalog, namespace):
            raise
        # created by the other writer


def _namespace_exists(catalog: Catalog, namespace: str) -> bool:
    try:
        catalog.load_namespace_properties(namespace)
    except Exception:  # noqa: BLE001 - any failure: the creation's own error says more
        return False
    return True


CREATED_TABLE_PROPERTIES = {
    # Appends merge small manifests (Iceberg's own default; pyiceberg's is off): a table
    # committed every epoch would otherwise list one more manifest at every commit.
    "commit.manifest-merge.enabled": "true",
    # Metadata files past the last 100 versions are deleted at commit: a file is
    # written per epoch, each as large as the kept history.
    "write.metadata.delete-after-commit.enabled": "true",
}
"""Properties of a table the sink creates: what a table committed every epoch needs to
stay bounded. A table created elsewhere keeps its own."""


def _create(catalog: Catalog, identifier: str, steps: Plan) -> Table:
    namespace = identifier.rpartition(".")[0]
    if namespace:
        _ensure_namespace(catalog, namespace)
    fields = [
        pa.field(
            c.name,
            c.type,
            nullable=c.nullable,
            metadata={_DOC: c.comment.encode()} if c.comment else None,
        )
        for c in steps.result.columns
    ]
    return catalog.create_table(
        identifier, schema=pa.schema(fields), properties=CREATED_TABLE_PROPERTIES
    )


def _evolve(table: Table, steps: Plan) -> None:
    with table.update_schema() as update:
        for step in steps.changes:
            if isinstance(step, AddColumn):
                col = step.column
                update.add_column((col.name,), iceberg_type(col.type), doc=col.comment)
            elif isinstance(step, WidenColumn):
                update.update_column((step.name,), field_type=iceberg_type(step.new))
            elif isinstance(step, SetComment):
                update.update_column((step.name,), doc=step.comment)


# -- partition specs ------------------------------------------------------------------


class PartitionField(BaseModel):
    """One field of a partition spec: a transform of a source column.

    Attributes:
        transform: ``identity``, ``year``, ``month``, ``day``, ``hour``, ``bucket``,
            ``truncate`` or ``void``.
        column: The source column (a top-level column name).
        width: The bucket count or truncation width (``bucket`` / ``truncate`` only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    transform: Literal["identity", "year", "month", "day", "hour", "bucket", "truncate", "void"]
    column: str = Field(min_length=1)
    width: int | None = Field(default=None, ge=1)

    @property
    def name(self) -> str:
        """The partition field's name: the column for identity, else ``<column>_<transform>``."""
        return self.column if self.transform == "identity" else f"{self.column}_{self.transform}"

    @property
    def iceberg_transform(self) -> str:
        """The transform in Iceberg's spelling (``bucket[16]``)."""
        return f"{self.transform}[{self.width}]" if self.width is not None else self.transform

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return self.column if self.transform == "identity" else f"{self.transform}({self.column})"


_TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate", "void")
_FIELD = re.compile(r"^\s*(?:(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([^(),]+?)\s*\)|([^(),\s]+))\s*$")


def parse_partition_spec(spec: object) -> tuple[PartitionField, ...]:
    """Parse a partition spec: ``["region", "day(created_at)", "bucket(16, id)"]``.

    A bare column name is ``identity``; ``bucket`` and ``truncate`` take a width first.

    Raises:
        ConfigError: Naming the entry that does not parse.
    """
    if spec is None:
        return ()
    if isinstance(spec, str) or not isinstance(spec, list | tuple):
        msg = (
            f"iceberg partition spec: expected a list such as "
            f"['region', 'day(created_at)', 'bucket(16, id)']; got {spec!r}"
        )
        raise ConfigError(msg)
    out: list[PartitionField] = []
    for entry in spec:
        if isinstance(entry, PartitionField):
            out.append(entry)
            continue
        m = _FIELD.match(entry) if isinstance(entry, str) else None
        transform = (m.group(1) or "identity").lower() if m else ""
        width = int(m.group(2)) if m and m.group(2) else None
        needs_width = transform in ("bucket", "truncate")
        if m is None or transform not in _TRANSFORMS or needs_width != (width is not None):
            msg = (
                f"iceberg partition spec: field {entry!r} does not parse; expected `column`, "
                f"`year|month|day|hour|void(column)`, `bucket(N, column)` or "
                f"`truncate(N, column)`"
            )
            raise ConfigError(msg)
        column = (m.group(3) or m.group(4)).strip()
        out.append(
            PartitionField.model_validate(
                {"transform": transform, "column": column, "width": width}
            )
        )
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        msg = f"iceberg partition spec: expected distinct fields; got {names}"
        raise ConfigError(msg)
    return tuple(out)


def apply_partition_spec(table: Table, fields: Sequence[PartitionField]) -> bool:
    """Add the configured partition fields the table's spec lacks; True if it changed.

    Raises:
        ConfigError: A field's column is absent or its transform cannot apply to the
            column's type (e.g. ``day`` of a string).
    """
    have = {f.name for f in table.spec().fields}
    missing = [f for f in fields if f.name not in have]
    if not missing:
        return False
    names = set(table.schema().column_names)
    for f in missing:
        if f.column not in names:
            msg = (
                f"iceberg table `{'.'.join(table.name())}`: partition field `{f}` names "
                f"column `{f.column}`; expected one of the table's columns; got none by that "
                f"name; fix `partition_by`"
            )
            raise ConfigError(msg)
    try:
        with table.update_spec() as update:
            for f in missing:
                update.add_field(f.column, f.iceberg_transform, f.name)
    except ValueError as exc:
        msg = (
            f"iceberg table `{'.'.join(table.name())}`: partition spec "
            f"{[str(f) for f in missing]} cannot apply to the columns' types ({exc}); "
            f"fix `partition_by`"
        )
        raise ConfigError(msg) from exc
    logger.info(
        "iceberg table `%s`: partitioned by %s",
        ".".join(table.name()),
        ", ".join(str(f) for f in missing),
    )
    return True
