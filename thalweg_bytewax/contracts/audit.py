"""The audit of validation: its schema, the rule registry, builders and readers.

Every judged record gets one compact audit row (ADR-0034): its locator, the step, the
version of the rule set that judged it, the verdict and the ids of the rules it failed.
The rule registry (one row per rule of a rule-set version, :meth:`RuleSet.manifest
<thalweg_bytewax.contracts.RuleSet.manifest>`) resolves a version to rule definitions;
:func:`explode_audit` joins the two into one verdict per (record, rule).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from thalweg_bytewax.lanes.read import read_lane
from thalweg_bytewax.records import RECORD_ID_BYTES, MetadataColumns
from thalweg_bytewax.sql.engine import shared_cursor

__all__ = [
    "AUDIT_EVALUATED_AT",
    "AUDIT_FAILED_RULES",
    "AUDIT_RULESET_VERSION",
    "AUDIT_STEP_ID",
    "AUDIT_VERDICT",
    "audit_batch",
    "audit_schema",
    "explode_audit",
    "read_audit",
    "read_rule_registry",
    "rules_schema",
]

AUDIT_STEP_ID = "step_id"
"""Audit column: the validating step."""
AUDIT_RULESET_VERSION = "ruleset_version"
"""Audit column: the version of the rule set that judged the record."""
AUDIT_VERDICT = "verdict"
"""Audit column: ``pass``, ``warn`` (passed, but failed a rule of severity ``warning`` or
``info``), ``fail`` or ``drop``."""
AUDIT_FAILED_RULES = "failed_rules"
"""Audit column: ids (``name@version``) of the rules the record failed."""
AUDIT_EVALUATED_AT = "evaluated_at"
"""Audit column: when the record was judged (UTC)."""

_DEFAULT_COLUMNS = MetadataColumns()


def audit_schema(columns: MetadataColumns = _DEFAULT_COLUMNS) -> pa.Schema:
    """The compact audit form: one row per record, its verdict and failed rule ids.

    A record passed every rule of its rule set that is not listed in ``failed_rules``;
    with the rule registry (:func:`rules_schema`) that answers "which verdict did record
    R get on rule X, under which version" for every record and rule.
    """
    return pa.schema(
        [
            pa.field(columns.record_id, pa.binary(RECORD_ID_BYTES)),
            pa.field(columns.source_topic, pa.string()),
            pa.field(columns.source_partition, pa.int32()),
            pa.field(columns.source_offset, pa.int64()),
            pa.field(AUDIT_STEP_ID, pa.string(), nullable=False),
            pa.field(AUDIT_RULESET_VERSION, pa.string(), nullable=False),
            pa.field(AUDIT_VERDICT, pa.string(), nullable=False),
            pa.field(AUDIT_FAILED_RULES, pa.list_(pa.string()), nullable=False),
            pa.field(AUDIT_EVALUATED_AT, pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def rules_schema() -> pa.Schema:
    """The rule registry: one row per rule of a rule set, with its full definition."""
    return pa.schema(
        [
            pa.field(AUDIT_RULESET_VERSION, pa.string(), nullable=False),
            pa.field("rule_id", pa.string(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("version", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("columns", pa.list_(pa.string()), nullable=False),
            pa.field("reason", pa.string(), nullable=False),
            pa.field("origin", pa.string(), nullable=False),
            pa.field("definition", pa.string(), nullable=False),
        ]
    )


def audit_batch(
    batch: pa.RecordBatch,
    *,
    verdict: pa.Array,
    failed: pa.ListArray,
    step_id: str,
    ruleset_version: str,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.RecordBatch:
    """Build compact audit rows (one per record of ``batch``), columnar."""
    n = batch.num_rows
    names = batch.schema.names
    schema = audit_schema(columns)

    def take(name: str, type_: pa.DataType) -> pa.Array:
        if name in names:
            col = batch.column(name)
            return col if col.type == type_ else col.cast(type_)
        return pa.nulls(n, type_)

    arrays = [
        take(columns.record_id, pa.binary(RECORD_ID_BYTES)),
        take(columns.source_topic, pa.string()),
        take(columns.source_partition, pa.int32()),
        take(columns.source_offset, pa.int64()),
        pa.repeat(pa.scalar(step_id, pa.string()), n),
        pa.repeat(pa.scalar(ruleset_version, pa.string()), n),
        verdict,
        failed,
        pa.repeat(pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC")), n),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_EXPLODE_SQL = """
SELECT a.*  EXCLUDE ({excluded}), r.name AS rule, r.rule_id, r.version AS rule_version,
       CASE WHEN a.verdict = 'drop' THEN 'drop'
            WHEN NOT list_contains(a.failed_rules, r.rule_id) THEN 'pass'
            WHEN json_extract_string(r.definition, '$.severity') IN ('warning', 'info')
                THEN 'warn'
            ELSE 'fail' END AS rule_verdict
FROM audit a JOIN rules r USING (ruleset_version)
ORDER BY ALL
"""


def explode_audit(audit: pa.Table, rules: pa.Table) -> pa.Table:
    """Expand compact audit rows to one row per (record, rule): verdict and rule version.

    This is the question the compact form answers, as a query: a record failed exactly
    the rules listed in its ``failed_rules`` and passed every other rule of its rule set.
    A failed rule's verdict is ``fail``, or ``warn`` for a rule of severity ``warning``
    or ``info`` (its registry definition says which), as the record's own verdict is.

    Args:
        audit: Audit rows (:func:`audit_schema`).
        rules: The rule registry (:meth:`RuleSet.manifest`), all versions.

    Returns:
        The audit columns (minus ``failed_rules``) plus ``rule``, ``rule_id``,
        ``rule_version`` and ``rule_verdict``.
    """
    cur = shared_cursor()
    cur.register("audit", audit)
    cur.register("rules", rules)
    try:
        return cur.sql(_EXPLODE_SQL.format(excluded=AUDIT_FAILED_RULES)).to_arrow_table()
    finally:
        cur.unregister("audit")
        cur.unregister("rules")


def read_audit(
    source: str | os.PathLike[str] | ds.Dataset,
    *,
    verdict: str | Sequence[str] | None = None,
    ruleset_version: str | Sequence[str] | None = None,
    filesystem: pafs.FileSystem | None = None,
    columns: MetadataColumns = _DEFAULT_COLUMNS,
) -> pa.Table:
    """Read an audit lane back, e.g. one written by ``ParquetSink`` from ``validate(...).audit``.

    With the rule registry (:func:`read_rule_registry`), :func:`explode_audit` turns it
    into one verdict per (record, rule)::

        audit = read_audit("lake/audit", verdict="fail")
        per_rule = explode_audit(audit, read_rule_registry("lake/rules"))

    Args:
        source: The lane directory (local path or URI), or a ``pyarrow.dataset.Dataset``.
        verdict: Keep only rows with this verdict (``pass``, ``fail``, ``drop``) or any of
            these.
        ruleset_version: Keep only rows judged by this rule-set version (or these).
        filesystem: A ``pyarrow.fs.FileSystem`` for ``source``.
        columns: Metadata column names (the prefix), for the schema of an empty lane.

    Returns:
        The audit rows (:func:`audit_schema` plus the columns the sink adds, such as
        ``_twg_emit_ts``), filtered.
    """
    expr = None
    for name, wanted in ((AUDIT_VERDICT, verdict), (AUDIT_RULESET_VERSION, ruleset_version)):
        if wanted is not None:
            values = [wanted] if isinstance(wanted, str) else list(wanted)
            clause = ds.field(name).isin(values)
            expr = clause if expr is None else expr & clause
    return read_lane(source, schema=audit_schema(columns), filter=expr, filesystem=filesystem)


def read_rule_registry(
    source: str | os.PathLike[str] | ds.Dataset, *, filesystem: pafs.FileSystem | None = None
) -> pa.Table:
    """Read rule registry files (:meth:`RuleSet.manifest`, one file per version) as one table."""
    return read_lane(source, schema=rules_schema(), filesystem=filesystem)
