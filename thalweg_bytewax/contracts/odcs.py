"""Read ODCS v3 data contracts and resolve them to a :class:`ContractSpec`.

The YAML is parsed with PyYAML and validated with the ``open-data-contract-standard``
pydantic models; then every schema object is resolved to an Arrow schema, column
descriptions, a natural key and rules. Anything the loader cannot honour fails here, at
load, with the path of the offending field (``schema[0].properties[3].logicalType``),
never later in the flow.
"""

from __future__ import annotations

import base64
import http.client
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_origins_in, redact_url
from thalweg_bytewax.contracts.checks import binding_session, check_pattern, check_sql
from thalweg_bytewax.contracts.spec import (
    ColumnSpec,
    ContractError,
    ContractSpec,
    MetricOp,
    ObjectSpec,
    Rule,
)

if TYPE_CHECKING:
    from thalweg_bytewax.sql.engine import SqlSession

__all__ = ["LOGICAL_TYPES", "load_contract", "parse_contract"]

logger = logging.getLogger(__name__)

LOGICAL_TYPES = (
    "string",
    "date",
    "timestamp",
    "time",
    "integer",
    "number",
    "boolean",
    "object",
    "array",
    "map",
    "vector",
)
"""The ODCS v3 logical types the loader maps to Arrow."""

_HTTP_TIMEOUT_SECONDS = 30
_DECIMAL = re.compile(
    r"^\s*(?:decimal|numeric|number)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*$", re.I
)
_INT_PHYSICAL = {
    "tinyint": pa.int8(),
    "int8": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "int16": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "int32": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "int64": pa.int64(),
    "long": pa.int64(),
}
_FLOAT_PHYSICAL = {
    "float": pa.float32(),
    "real": pa.float32(),
    "float32": pa.float32(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "double precision": pa.float64(),
}
_VECTOR_ELEMENTS = {
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
}
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


def _fail(origin: str, path: str, detail: str) -> ContractError:
    return ContractError(f"contract `{origin}`: `{path}`: {detail}")


def _loc_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _cause(exc: BaseException, url: str) -> BaseException | None:
    """``exc`` if its text holds none of ``url``'s secrets, else ``None`` (no chaining).

    A traceback prints the cause's text; a client exception that quotes the URL (e.g.
    ``http.client.InvalidURL`` with the password as a "port") must not be chained.
    """
    text = f"{exc!s} {exc!r}"
    return exc if redact_origins_in(text, url) == text else None


def _http_request(url: str) -> urllib.request.Request:
    """A GET for ``url``; userinfo becomes an ``Authorization: Basic`` header."""
    split = urllib.parse.urlsplit(url)
    netloc = split.netloc
    headers = {}
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        url = urllib.parse.urlunsplit(split._replace(netloc=host))
    return urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) only


def _read(source: str | Path) -> tuple[str, str]:
    """``(text, origin)``: the contract text and where it came from, redacted."""
    if isinstance(source, Path):
        return _read_local(source), str(source)
    text = str(source)
    shown = redact_url(text)
    scheme = urlsplit(text).scheme
    if scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(  # noqa: S310 - scheme checked above
                _http_request(text), timeout=_HTTP_TIMEOUT_SECONDS
            ) as resp:
                return resp.read().decode("utf-8"), shown
        except urllib.error.HTTPError as exc:
            exc.close()  # it holds the response (and its socket) open
            # Never the client's text: it may quote the URL. The status says enough.
            msg = f"contract `{shown}`: cannot fetch: expected HTTP 200; got HTTP {exc.code}"
            raise ContractError(msg) from _cause(exc, text)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None)
            detail = getattr(reason, "strerror", None) or getattr(exc, "strerror", None)
            msg = (
                f"contract `{shown}`: cannot fetch: {type(exc).__name__}"
                + (f" ({redact_origins_in(str(detail), text)})" if detail else "")
                + "; check the URL and that the server is reachable"
            )
            raise ContractError(msg) from _cause(exc, text)
    if scheme == "" or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        return _read_local(Path(text)), text
    if scheme == "file":
        return _read_local(Path(urlsplit(text).path)), shown
    return _read_filesystem(text), shown


def _read_local(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"contract `{path}`: cannot read: {exc.strerror or exc}"
        raise ContractError(msg) from exc


def _read_filesystem(uri: str) -> str:
    from pyarrow import fs  # noqa: PLC0415

    shown = redact_url(uri)
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        fsspec = require("fsspec", extra="contracts")
        try:
            with fsspec.open(uri, "rt", encoding="utf-8") as fh:
                return str(fh.read())
        except (OSError, ValueError, ImportError) as exc:
            # The filesystem's own text may quote the URI: redact every origin in it.
            msg = (
                f"contract `{shown}`: cannot read through fsspec: {type(exc).__name__}: "
                f"{redact_origins_in(str(exc), uri)}"
            )
            raise ContractError(msg) from _cause(exc, uri)
    try:
        with filesystem.open_input_stream(path) as stream:
            return bytes(stream.read()).decode("utf-8")
    except OSError as exc:
        msg = (
            f"contract `{shown}`: cannot read: {type(exc).__name__}: "
            f"{redact_origins_in(str(exc), uri)}"
        )
        raise ContractError(msg) from _cause(exc, uri)


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
    text, origin = _read(source)
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
        raise _fail(origin, "apiVersion", f"expected an ODCS v3 version (v3.x.y); got {api!r}")
    if data.get("kind", "DataContract") != "DataContract":
        raise _fail(origin, "kind", f"expected 'DataContract'; got {data.get('kind')!r}")
    try:
        model = model_mod.OpenDataContractStandard.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(origin, _loc_path(tuple(err["loc"])), err["msg"]) from exc
    ignored: list[str] = []
    # One session binds every rule of this contract, and only this contract's rules;
    # DuckDB is opened only if a rule carries SQL.
    session = binding_session()
    objects = tuple(
        _resolve_object(origin, f"schema[{i}]", obj, ignored, session)
        for i, obj in enumerate(model.schema_ or ())
    )
    if not objects:
        raise _fail(origin, "schema", "expected at least one schema object; got none")
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
        raise _fail(origin, f"{path}.name", "expected a schema object name; got none")
    columns: list[ColumnSpec] = []
    rules: list[Rule] = []
    names: set[str] = set()
    for j, prop in enumerate(obj.properties or ()):
        ppath = f"{path}.properties[{j}]"
        if not prop.name:
            raise _fail(origin, f"{ppath}.name", "expected a property name; got none")
        if prop.name in names:
            raise _fail(origin, f"{ppath}.name", f"duplicate property {prop.name!r}")
        names.add(prop.name)
        arrow_type = _arrow_type(origin, ppath, prop)
        pk_pos = None
        if prop.primaryKey:
            pk_pos = prop.primaryKeyPosition if (prop.primaryKeyPosition or 0) > 0 else j + 1
        columns.append(
            ColumnSpec(
                name=prop.name,
                arrow_type=arrow_type,
                required=bool(prop.required),
                unique=bool(prop.unique),
                primary_key_position=pk_pos,
                description=prop.description,
                logical_type=prop.logicalType,
                physical_type=prop.physicalType,
            )
        )
        rules.extend(_property_rules(origin, ppath, prop, arrow_type))
        for k, q in enumerate(prop.quality or ()):
            rule = _quality_rule(
                origin, f"{ppath}.quality[{k}]", q, prop.name, ignored, _object_names(obj)
            )
            if rule is not None:
                rules.append(rule)
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    for k, q in enumerate(obj.quality or ()):
        qpath = f"{path}.quality[{k}]"
        rule = _quality_rule(origin, qpath, q, None, ignored, _object_names(obj))
        if rule is None:
            continue
        for m, col in enumerate(rule.columns):
            if col not in names:
                raise _fail(
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
        raise _fail(origin, f"{path} rule `{rule.name}`", str(exc)) from exc


def _options(prop: Any) -> dict[str, Any]:
    return dict(prop.logicalTypeOptions or {})


def _arrow_type(origin: str, path: str, prop: Any) -> pa.DataType:  # noqa: C901
    logical = prop.logicalType
    physical = (prop.physicalType or "").strip().lower()
    opts = _options(prop)
    if logical is None:
        if physical in _INT_PHYSICAL:
            return _INT_PHYSICAL[physical]
        if physical in _FLOAT_PHYSICAL:
            return _FLOAT_PHYSICAL[physical]
        if (m := _DECIMAL.match(physical)) is not None:
            return _decimal(origin, f"{path}.physicalType", int(m.group(1)), int(m.group(2) or 0))
        if physical in ("string", "varchar", "text") or physical.startswith("varchar"):
            return pa.string()
        raise _fail(
            origin,
            f"{path}.logicalType",
            f"expected a logical type (one of {list(LOGICAL_TYPES)!r}) or a known physical "
            f"type; got neither (physicalType={prop.physicalType!r})",
        )
    match logical:
        case "string":
            return pa.binary() if physical in ("binary", "bytes", "blob", "bytea") else pa.string()
        case "date":
            return pa.date32()
        case "timestamp":
            unit = "ms" if ("millis" in physical or "(3)" in physical) else "us"
            naive = "ntz" in physical or "without time zone" in physical or physical == "datetime"
            return pa.timestamp(unit) if naive else pa.timestamp(unit, tz="UTC")
        case "time":
            return pa.time64("us")
        case "integer":
            return _INT_PHYSICAL.get(physical, pa.int64())
        case "number":
            if (m := _DECIMAL.match(physical)) is not None:
                where = f"{path}.physicalType"
                return _decimal(origin, where, int(m.group(1)), int(m.group(2) or 0))
            if "precision" in opts:
                where = f"{path}.logicalTypeOptions"
                return _decimal(origin, where, int(opts["precision"]), int(opts.get("scale", 0)))
            return _FLOAT_PHYSICAL.get(physical, pa.float64())
        case "boolean":
            return pa.bool_()
        case "object":
            fields = [
                pa.field(p.name, _arrow_type(origin, f"{path}.properties[{i}]", p), not p.required)
                for i, p in enumerate(prop.properties or ())
            ]
            return pa.struct(fields)
        case "array":
            if prop.items is None:
                return pa.list_(_untyped_items(origin, f"{path}.physicalType", physical))
            item = _arrow_type(origin, f"{path}.items", prop.items)
            return pa.list_(pa.field("item", item, nullable=not prop.items.required))
        case "map":
            if prop.map is None or prop.map.key is None or prop.map.value is None:
                raise _fail(origin, f"{path}.map", "expected `key` and `value` of a map")
            value = _arrow_type(origin, f"{path}.map.value", prop.map.value)
            return pa.map_(
                _arrow_type(origin, f"{path}.map.key", prop.map.key),
                pa.field("value", value, nullable=not prop.map.value.required),
            )
        case "vector":
            element = _VECTOR_ELEMENTS.get(str(opts.get("elementType", "float32")))
            if element is None or "dimensions" not in opts:
                raise _fail(
                    origin,
                    f"{path}.logicalTypeOptions",
                    f"expected `dimensions` and an `elementType` in {sorted(_VECTOR_ELEMENTS)!r}",
                )
            return pa.list_(element, int(opts["dimensions"]))
        case _:
            raise _fail(
                origin,
                f"{path}.logicalType",
                f"unknown logical type; expected one of {list(LOGICAL_TYPES)!r}; got {logical!r}",
            )


def _decimal(origin: str, path: str, precision: int, scale: int) -> pa.DataType:
    """``decimal128`` up to 38 digits, ``decimal256`` up to 76; anything else is refused."""
    if not 1 <= precision <= 76 or not 0 <= scale <= precision:
        raise _fail(
            origin,
            path,
            f"expected a decimal precision from 1 to 76 and a scale from 0 to the precision; "
            f"got precision {precision} and scale {scale}",
        )
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


_ARRAY_PHYSICAL = re.compile(r"^\s*(?:array|list)\s*<\s*(.+?)\s*>\s*$|^\s*(.+?)\s*\[\s*\]\s*$")


def _untyped_items(origin: str, path: str, physical: str) -> pa.DataType:
    """The item type of an ``array`` without ``items``.

    The physical type names it when it can (``array<int>``, ``list<double>``,
    ``varchar[]``); otherwise the items are strings, the type ODCS gives a value it
    does not otherwise describe.
    """
    m = _ARRAY_PHYSICAL.match(physical)
    inner = (m.group(1) or m.group(2)).strip().lower() if m else ""
    if inner in _INT_PHYSICAL:
        return _INT_PHYSICAL[inner]
    if inner in _FLOAT_PHYSICAL:
        return _FLOAT_PHYSICAL[inner]
    if (d := _DECIMAL.match(inner)) is not None:
        return _decimal(origin, path, int(d.group(1)), int(d.group(2) or 0))
    if inner in ("boolean", "bool"):
        return pa.bool_()
    return pa.string()


def _property_rules(origin: str, path: str, prop: Any, arrow_type: pa.DataType) -> list[Rule]:
    col = prop.name
    opts = _options(prop)
    rules = [Rule.of_type(col, arrow_type)]
    if prop.required:
        rules.append(Rule.not_null(col))
    if prop.unique:
        rules.append(Rule.unique(col))
    if prop.enum:
        for k, entry in enumerate(prop.enum):
            if entry.value is None:
                raise _fail(
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
        raise _fail(origin, f"{path}.logicalTypeOptions", "both `minimum` and `exclusiveMinimum`")
    if "maximum" in opts and "exclusiveMaximum" in opts:
        raise _fail(origin, f"{path}.logicalTypeOptions", "both `maximum` and `exclusiveMaximum`")
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
        raise _fail(
            origin,
            path,
            f"expected exactly one of {[op.value for op in MetricOp]!r}; got "
            f"{[op.value for op, _ in found]!r}",
        )
    return found[0]


def _object_names(obj: Any) -> tuple[str, ...]:
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


def _quality_rule(  # noqa: C901
    origin: str,
    path: str,
    q: Any,
    column: str | None,
    ignored: list[str],
    object_names: tuple[str, ...] = (),
) -> Rule | None:
    qtype = (q.type or ("library" if (q.metric or q.rule) else "text")).lower()
    name = q.name or q.id or ""
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
            raise _fail(origin, f"{path}.implementation", "expected a SQL predicate string")
        return Rule.sql(name or f"{column or 'row'}_predicate", expr)
    if qtype == "sql":
        if not q.query:
            raise _fail(origin, f"{path}.query", "expected a SQL query")
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
            "sql", op=op, threshold=threshold, expression=query, name=name or "sql_check"
        )
    if qtype != "library":
        raise _fail(
            origin, f"{path}.type", f"expected text, library, sql or custom; got {q.type!r}"
        )
    metric = q.metric or q.rule
    if metric not in _METRICS:
        raise _fail(origin, f"{path}.metric", f"expected one of {list(_METRICS)!r}; got {metric!r}")
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
            raise _fail(
                origin, f"{path}.arguments.properties", f"expected the properties {metric} measures"
            )
        cols = tuple(str(p) for p in props)
    unit = (q.unit or "rows").lower()
    if unit not in ("rows", "percent"):
        raise _fail(origin, f"{path}.unit", f"expected 'rows' or 'percent'; got {q.unit!r}")
    values = args.get("validValues") if metric == "invalidValues" else args.get("missingValues")
    pattern = args.get("pattern") if metric == "invalidValues" else None
    if metric == "invalidValues" and values is None and pattern is None:
        raise _fail(
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
    )
