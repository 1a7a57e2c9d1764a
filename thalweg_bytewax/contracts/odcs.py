"""Read ODCS v3 data contracts and resolve them to a :class:`ContractSpec`.

The YAML is parsed with PyYAML and validated with the ``open-data-contract-standard``
pydantic models; then every schema object is resolved to an Arrow schema, column
descriptions, a natural key and rules. Anything the loader cannot honour fails here, at
load, with the path of the offending field (``schema[0].properties[3].logicalType``),
never later in the flow.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.contracts._odcs_read import read_contract_text
from thalweg_bytewax.contracts._odcs_rules import object_names, property_rules, quality_rule
from thalweg_bytewax.contracts._odcs_types import LOGICAL_TYPES, arrow_type, field_error
from thalweg_bytewax.contracts.checks import binding_session, check_pattern, check_sql
from thalweg_bytewax.contracts.spec import (
    ColumnSpec,
    ContractError,
    ContractSpec,
    ObjectSpec,
    Rule,
)

if TYPE_CHECKING:
    from thalweg_bytewax.sql.engine import SqlSession

__all__ = ["LOGICAL_TYPES", "load_contract", "parse_contract"]

logger = logging.getLogger(__name__)


def _loc_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_contract(source: str | Path) -> ContractSpec:
    """Load an ODCS v3 contract and resolve it to a :class:`ContractSpec`.

    Args:
        source: A local path, an ``http(s)://`` URL, or a filesystem URL that pyarrow
            (``s3://``, ``gs://``, ``hdfs://`` ...) or fsspec (``memory://`` ...) can open.

    Returns:
        The resolved contract.

    Raises:
        ContractError: When the contract cannot be read, is not valid YAML or ODCS v3,
            or declares something the loader cannot honour; the message names the path
            of the offending field.
    """
    text, origin = read_contract_text(source)
    return parse_contract(text, origin=origin)


def parse_contract(document: str | Mapping[str, Any], *, origin: str = "<memory>") -> ContractSpec:
    """Resolve ODCS v3 YAML text (or an already parsed mapping) to a :class:`ContractSpec`.

    Args:
        document: The YAML text, or its parsed mapping.
        origin: Where it came from, for messages (credentials in it are redacted).

    Returns:
        The resolved contract.

    Raises:
        ContractError: As :func:`load_contract`.
    """
    origin = redact_url(origin)
    yaml = require("yaml", extra="contracts")
    model_mod = require("open_data_contract_standard.model", extra="contracts")
    import pydantic  # noqa: PLC0415

    if isinstance(document, str):
        try:
            data = yaml.safe_load(document)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            msg = f"contract `{origin}`: malformed YAML{where}: {problem}"
            raise ContractError(msg) from exc
    else:
        data = dict(document)
    if not isinstance(data, Mapping):
        msg = f"contract `{origin}`: expected a YAML mapping at the top; got {type(data).__name__}"
        raise ContractError(msg)
    api = str(data.get("apiVersion", ""))
    if not api.startswith("v3"):
        raise field_error(
            origin, "apiVersion", f"expected an ODCS v3 version (v3.x.y); got {api!r}"
        )
    if data.get("kind", "DataContract") != "DataContract":
        raise field_error(origin, "kind", f"expected 'DataContract'; got {data.get('kind')!r}")
    try:
        model = model_mod.OpenDataContractStandard.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise field_error(origin, _loc_path(tuple(err["loc"])), err["msg"]) from exc
    ignored: list[str] = []
    # One session binds every rule of this contract, and only this contract's rules;
    # DuckDB is opened only if a rule carries SQL.
    session = binding_session()
    objects = tuple(
        _resolve_object(origin, f"schema[{i}]", obj, ignored, session)
        for i, obj in enumerate(model.schema_ or ())
    )
    if not objects:
        raise field_error(origin, "schema", "expected at least one schema object; got none")
    if ignored:
        logger.info("contract %s: quality entries not enforced in a stream: %s", origin, ignored)
    return ContractSpec(
        id=model.id,
        name=model.name,
        version=model.version,
        objects=objects,
        source=origin,
        ignored_quality=tuple(ignored),
    )


def _resolve_object(  # noqa: C901
    origin: str, path: str, obj: Any, ignored: list[str], session: SqlSession
) -> ObjectSpec:
    if not obj.name:
        raise field_error(origin, f"{path}.name", "expected a schema object name; got none")
    columns: list[ColumnSpec] = []
    rules: list[Rule] = []
    names: set[str] = set()
    for j, prop in enumerate(obj.properties or ()):
        ppath = f"{path}.properties[{j}]"
        if not prop.name:
            raise field_error(origin, f"{ppath}.name", "expected a property name; got none")
        if prop.name in names:
            raise field_error(origin, f"{ppath}.name", f"duplicate property {prop.name!r}")
        names.add(prop.name)
        column_type = arrow_type(origin, ppath, prop)
        pk_pos = None
        if prop.primaryKey:
            pk_pos = prop.primaryKeyPosition if (prop.primaryKeyPosition or 0) > 0 else j + 1
        columns.append(
            ColumnSpec(
                name=prop.name,
                arrow_type=column_type,
                required=bool(prop.required),
                unique=bool(prop.unique),
                primary_key_position=pk_pos,
                description=prop.description,
                logical_type=prop.logicalType,
                physical_type=prop.physicalType,
            )
        )
        rules.extend(property_rules(origin, ppath, prop, column_type))
        for k, q in enumerate(prop.quality or ()):
            rule = quality_rule(
                origin, f"{ppath}.quality[{k}]", q, prop.name, ignored, object_names(obj)
            )
            if rule is not None:
                rules.append(rule)
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    for k, q in enumerate(obj.quality or ()):
        qpath = f"{path}.quality[{k}]"
        rule = quality_rule(origin, qpath, q, None, ignored, object_names(obj))
        if rule is None:
            continue
        for m, col in enumerate(rule.columns):
            if col not in names:
                raise field_error(
                    origin,
                    f"{qpath}.arguments.properties[{m}]",
                    f"rule on a missing column: expected one of {sorted(names)!r}; got {col!r}",
                )
        rules.append(rule)
    for rule in rules:
        _check_rule(origin, path, rule, schema, session)
    pk = sorted(
        (c for c in columns if c.primary_key_position), key=lambda c: c.primary_key_position or 0
    )
    natural_key = tuple(c.name for c in pk) or next(((c.name,) for c in columns if c.unique), ())
    if pk and not (len(pk) == 1 and pk[0].unique):
        rules.append(Rule.unique(*natural_key, name="primary_key_unique"))
    return ObjectSpec(
        name=obj.name,
        columns=tuple(columns),
        natural_key=natural_key,
        rules=tuple(rules),
        description=obj.description,
    )


def _check_rule(origin: str, path: str, rule: Rule, schema: pa.Schema, session: SqlSession) -> None:
    try:
        if rule.pattern is not None:
            check_pattern(rule.pattern)
        if rule.expression is not None:
            check_sql(rule.expression, schema, scalar=rule.metric == "sql", session=session)
    except ContractError as exc:
        raise field_error(origin, f"{path} rule `{rule.name}`", str(exc)) from exc
