"""Translate an ODCS property's options and quality entries into :class:`Rule` objects.

Property options (``required``, ``unique``, ``enum``, lengths, bounds, patterns and
formats) become row rules; ``quality`` entries become batch metrics, SQL checks or row
predicates, or are listed as not enforced in a stream (``text`` and other engines).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from thalweg_bytewax.contracts._odcs_types import field_error, logical_type_options
from thalweg_bytewax.contracts.rule_spec import parse_severity
from thalweg_bytewax.contracts.spec import ContractError, MetricOp, Rule

__all__ = ["object_names", "property_rules", "quality_rule"]

# Formats that become a pattern rule; the rest are descriptive only.
_FORMAT_PATTERNS = {
    "uuid": r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "email": r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
}
_METRICS = ("nullValues", "missingValues", "invalidValues", "duplicateValues", "rowCount")
_ROW_SQL_ENGINES = ("duckdb", "thalweg")
_PLACEHOLDERS = ("${table}", "{table}", "${object}", "{object}")
_COLUMN_PLACEHOLDERS = ("${column}", "{column}", "${property}", "{property}")
_BATCH_TABLE = "batch"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def property_rules(origin: str, path: str, prop: Any, arrow_type: pa.DataType) -> list[Rule]:
    """The row rules an ODCS property declares through its type and options."""
    col = prop.name
    opts = logical_type_options(prop)
    rules = [Rule.of_type(col, arrow_type)]
    if prop.required:
        rules.append(Rule.not_null(col))
    if prop.unique:
        rules.append(Rule.unique(col))
    if prop.enum:
        for k, entry in enumerate(prop.enum):
            if entry.value is None:
                raise field_error(
                    origin,
                    f"{path}.enum[{k}].value",
                    f"expected the allowed value; got only label={entry.label!r} (values are "
                    "compared, labels are for people); add `value:`",
                )
        rules.append(Rule.one_of(col, [e.value for e in prop.enum]))
    if prop.logicalType in ("string", None):
        if "minLength" in opts or "maxLength" in opts:
            rules.append(Rule.length(col, opts.get("minLength"), opts.get("maxLength")))
        if "pattern" in opts:
            rules.append(Rule.matches(col, str(opts["pattern"])))
        fmt = opts.get("format")
        if fmt in _FORMAT_PATTERNS:
            rules.append(Rule.matches(col, _FORMAT_PATTERNS[fmt], name=f"{col}_{fmt}_format"))
    lo_key = next((k for k in ("minimum", "exclusiveMinimum") if k in opts), None)
    hi_key = next((k for k in ("maximum", "exclusiveMaximum") if k in opts), None)
    if "minimum" in opts and "exclusiveMinimum" in opts:
        raise field_error(
            origin, f"{path}.logicalTypeOptions", "both `minimum` and `exclusiveMinimum`"
        )
    if "maximum" in opts and "exclusiveMaximum" in opts:
        raise field_error(
            origin, f"{path}.logicalTypeOptions", "both `maximum` and `exclusiveMaximum`"
        )
    if lo_key or hi_key:
        rules.append(
            Rule.between(
                col,
                opts.get(lo_key) if lo_key else None,
                opts.get(hi_key) if hi_key else None,
                min_inclusive=lo_key != "exclusiveMinimum",
                max_inclusive=hi_key != "exclusiveMaximum",
            )
        )
    return rules


def _threshold(origin: str, path: str, q: Any) -> tuple[MetricOp, Any]:
    found = [(op, getattr(q, op.value)) for op in MetricOp if getattr(q, op.value) is not None]
    if len(found) != 1:
        raise field_error(
            origin,
            path,
            f"expected exactly one of {[op.value for op in MetricOp]!r}; got "
            f"{[op.value for op, _ in found]!r}",
        )
    return found[0]


def object_names(obj: Any) -> tuple[str, ...]:
    """The names a SQL check may use for its own schema object: name and physical name.

    A schema-qualified physical name (``db.sales.orders``) is bound by its last part.
    """
    names = [str(obj.name)]
    if obj.physicalName:
        names.append(str(obj.physicalName).rsplit(".", 1)[-1].strip('"'))
    return tuple(dict.fromkeys(n for n in names if n and n != _BATCH_TABLE))


_NAME_IN_SQL = r"(?<![\w\"]){}(?![\w\"])"


def _bind_names(query: str, names: tuple[str, ...]) -> str:
    """``query`` with the object's own names bound to the batch (as CTEs around it).

    ``select count(*) from air_quality where …`` (the ODCS standard's own form) then
    reads the batch; ``${table}`` is replaced by ``batch`` before this. A name is bound
    only when the query mentions it, so queries that do not keep their rule version.
    """
    used = [
        n
        for n in names
        if re.search(_NAME_IN_SQL.format(re.escape(n)), query, re.IGNORECASE) or _ident(n) in query
    ]
    if not used:
        return query
    ctes = ", ".join(
        f"{_ident(n)} AS (SELECT * FROM {_BATCH_TABLE})"  # noqa: S608 - quoted names
        for n in used
    )
    return f"WITH {ctes}\nSELECT * FROM (\n{query}\n) AS {_ident('_twg_check')}"


def quality_rule(  # noqa: C901
    origin: str,
    path: str,
    q: Any,
    column: str | None,
    ignored: list[str],
    object_names: tuple[str, ...] = (),
) -> Rule | None:
    """The rule of one ODCS quality entry, or ``None`` (path added to ``ignored``)."""
    qtype = (q.type or ("library" if (q.metric or q.rule) else "text")).lower()
    name = q.name or q.id or ""
    try:
        severity = parse_severity(q.severity, rule=name or path)
    except ContractError as exc:
        raise field_error(origin, f"{path}.severity", str(exc)) from None
    if qtype == "text":
        ignored.append(path)
        return None
    if qtype == "custom":
        if (q.engine or "").lower() not in _ROW_SQL_ENGINES:
            ignored.append(path)
            return None
        impl = q.implementation
        expr = impl.get("predicate") or impl.get("expression") if isinstance(impl, dict) else impl
        if not isinstance(expr, str) or not expr.strip():
            raise field_error(origin, f"{path}.implementation", "expected a SQL predicate string")
        return Rule.sql(name or f"{column or 'row'}_predicate", expr, severity=severity)
    if qtype == "sql":
        if not q.query:
            raise field_error(origin, f"{path}.query", "expected a SQL query")
        op, threshold = _threshold(origin, path, q)
        query = q.query
        for ph in _PLACEHOLDERS:
            query = query.replace(ph, _BATCH_TABLE)
        if column is not None:
            # Quoted as an identifier: a column named `a"b` neither breaks nor splices SQL.
            for ph in _COLUMN_PLACEHOLDERS:
                query = query.replace(ph, _ident(column))
        query = _bind_names(query, object_names)
        return Rule.batch_metric(
            "sql",
            op=op,
            threshold=threshold,
            expression=query,
            name=name or "sql_check",
            severity=severity,
        )
    if qtype != "library":
        raise field_error(
            origin, f"{path}.type", f"expected text, library, sql or custom; got {q.type!r}"
        )
    metric = q.metric or q.rule
    if metric not in _METRICS:
        raise field_error(
            origin, f"{path}.metric", f"expected one of {list(_METRICS)!r}; got {metric!r}"
        )
    op, threshold = _threshold(origin, path, q)
    args = dict(q.arguments or {})
    cols: tuple[str, ...]
    if column is not None:
        cols = (column,)
    elif metric == "rowCount":
        cols = ()
    else:
        props = args.get("properties") or ([args["column"]] if "column" in args else None)
        if not props:
            raise field_error(
                origin, f"{path}.arguments.properties", f"expected the properties {metric} measures"
            )
        cols = tuple(str(p) for p in props)
    unit = (q.unit or "rows").lower()
    if unit not in ("rows", "percent"):
        raise field_error(origin, f"{path}.unit", f"expected 'rows' or 'percent'; got {q.unit!r}")
    values = args.get("validValues") if metric == "invalidValues" else args.get("missingValues")
    pattern = args.get("pattern") if metric == "invalidValues" else None
    if metric == "invalidValues" and values is None and pattern is None:
        raise field_error(
            origin, f"{path}.arguments", "expected `validValues` or `pattern` for invalidValues"
        )
    return Rule.batch_metric(
        metric,
        *cols,
        op=op,
        threshold=threshold,
        unit=unit,
        values=values,
        pattern=pattern,
        name=name,
        severity=severity,
    )
