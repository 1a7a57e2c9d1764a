"""The neutral schema model -> an ODCS v3.2.0 data contract, with its losses stated.

Each model becomes one schema object. Types map to what ``load_contract`` resolves
back to the codec's Arrow type: ``logicalType`` plus a ``physicalType`` the loader
reads (``int32``, ``float``, ``decimal(p,s)``, ``timestamp(3) with time zone`` ...);
nested records are ``object`` properties; arrays carry ``items`` and maps ``map``
(``required`` on them says whether items / values may be null); enums are ``string``
with their symbols as allowed values (``enum``), which the loader turns into a rule.

What ODCS cannot say is stated, never silent: on the property (a ``conversionLoss``
custom property) and all together in ``description.limitations``. A loss found by the
source reader (an Avro default, a JSON Schema keyword, a Protobuf ``oneof``) is stated
on the property at its path, one of the whole schema (Protobuf field numbers) on the
schema object. Losses: a union of several types (an ``object`` with one optional
property per branch), ``fixed(n)`` (bytes, length not kept), ``time-millis`` (loads as
microseconds), a decimal wider than 38 digits (string), unsigned integers (int64 with
``minimum: 0``), durations (int64 microseconds), the ``null`` type (an always-null
string), an enum without symbols (a string without allowed values).
"""

from __future__ import annotations

from typing import Any

from thalweg_bytewax.schemamodel._model import Kind, SchemaField, SchemaModel, SchemaType

__all__ = ["LOSS_PROPERTY", "ODCS_API_VERSION", "to_odcs"]

ODCS_API_VERSION = "v3.2.0"
"""The ODCS version the contracts declare: the first whose JSON Schema admits the
``timestamp``, ``time`` and ``map`` logical types and property-level ``enum`` values
they use."""

LOSS_PROPERTY = "conversionLoss"
"""The custom property that states what a property's ODCS form does not keep."""

_PLAIN: dict[Kind, tuple[str, str]] = {
    Kind.BOOLEAN: ("boolean", "boolean"),
    Kind.INT32: ("integer", "int32"),
    Kind.INT64: ("integer", "int64"),
    Kind.FLOAT32: ("number", "float"),
    Kind.FLOAT64: ("number", "double"),
    Kind.STRING: ("string", "string"),
    Kind.BYTES: ("string", "bytes"),
    Kind.DATE: ("date", "date"),
    Kind.TIME_MICROS: ("time", "time(6)"),
    Kind.TIMESTAMP_MILLIS: ("timestamp", "timestamp(3) with time zone"),
    Kind.TIMESTAMP_MICROS: ("timestamp", "timestamp(6) with time zone"),
    Kind.LOCAL_TIMESTAMP_MILLIS: ("timestamp", "timestamp(3) without time zone"),
    Kind.LOCAL_TIMESTAMP_MICROS: ("timestamp", "timestamp(6) without time zone"),
    Kind.JSON: ("string", "json"),
}
_MAX_DECIMAL128 = 38


def _state_loss(element: dict[str, Any], what: str) -> None:
    element.setdefault("customProperties", []).append({"property": LOSS_PROPERTY, "value": what})


class _Writer:
    def __init__(self) -> None:
        self.losses: list[str] = []
        self.by_path: dict[str, dict[str, Any]] = {}

    def lose(self, prop: dict[str, Any], path: str, what: str) -> None:
        _state_loss(prop, what)
        self.losses.append(f"{path}: {what}")

    def place(self, obj: dict[str, Any], losses: tuple[str, ...]) -> None:
        """State each of the model's ``path: what`` losses on the property at its path.

        A loss whose path names no property (``$``, or none at all, such as Protobuf
        field numbers) is stated on the schema object.
        """
        paths = sorted(self.by_path, key=len, reverse=True)
        for loss in losses:
            path = next((p for p in paths if loss.startswith(f"{p}: ")), None)
            if path is None:
                _state_loss(obj, loss)
            else:
                _state_loss(self.by_path[path], loss[len(path) + 2 :])

    def prop(self, name: str | None, t: SchemaType, required: bool, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {} if name is None else {"name": name}
        self.by_path[path] = out
        self.fill(out, t, path)
        out["required"] = required
        return out

    def field(self, f: SchemaField, path: str) -> dict[str, Any]:
        out = self.prop(f.name, f.type, f.required, path)
        if f.description:
            out["description"] = f.description
        return out

    def fill(self, out: dict[str, Any], t: SchemaType, path: str) -> None:  # noqa: C901, PLR0912
        k = t.kind
        if k in _PLAIN:
            out["logicalType"], out["physicalType"] = _PLAIN[k]
        elif k == Kind.UUID:
            out.update(logicalType="string", physicalType="uuid",
                       logicalTypeOptions={"format": "uuid"})
        elif k == Kind.ENUM:
            out.update(logicalType="string", physicalType="enum")
            symbols = list(dict.fromkeys(t.symbols))
            if symbols:
                out["enum"] = [{"value": s} for s in symbols]
            else:
                self.lose(out, path, "an enum without symbols (no value allowed): any string")
        elif k == Kind.DECIMAL:
            p, s = t.precision or 0, t.scale or 0
            if p > _MAX_DECIMAL128:
                out.update(logicalType="string", physicalType=f"decimal({p},{s})")
                self.lose(out, path, f"decimal({p},{s}) wider than 38 digits: text in ODCS")
            else:
                out.update(logicalType="number", physicalType=f"decimal({p},{s})")
        elif k == Kind.FIXED:
            out.update(logicalType="string", physicalType="bytes")
            self.lose(out, path, f"fixed({t.size}): bytes, the fixed length is not kept")
        elif k == Kind.TIME_MILLIS:
            out.update(logicalType="time", physicalType="time(3)")
            self.lose(out, path, "time-millis: loads back as time in microseconds")
        elif k in (Kind.UINT32, Kind.UINT64):
            out.update(logicalType="integer", physicalType="int64",
                       logicalTypeOptions={"minimum": 0})
            self.lose(out, path, f"{k.value}: loads back as signed int64 with minimum 0")
        elif k == Kind.DURATION:
            out.update(logicalType="integer", physicalType="int64")
            self.lose(out, path, "duration: loads back as int64 microseconds")
        elif k == Kind.NULL:
            out.update(logicalType="string", physicalType="null")
            self.lose(out, path, "the null type: a string that is always null")
        elif k == Kind.OBJECT:
            out.update(logicalType="object", physicalType="record" if t.name else "object")
            out["properties"] = [self.field(f, f"{path}.{f.name}") for f in t.fields]
        elif k == Kind.UNION:
            out.update(logicalType="object", physicalType="union")
            out["properties"] = [
                self.prop(_branch_name(b), b, False, f"{path}.{_branch_name(b)}")
                for b in t.branches
            ]
            self.lose(out, path, "a union of several types: one optional property per branch, "
                      "at most one set (not enforced)")
        elif k == Kind.ARRAY:
            assert t.items is not None  # every array has an item type
            out.update(logicalType="array", physicalType="array")
            out["items"] = self.prop(None, t.items, t.items_required, f"{path}[]")
        elif k == Kind.MAP:
            assert t.items is not None  # every map has a value type
            out.update(logicalType="map", physicalType="map")
            out["map"] = {
                "key": {"logicalType": "string", "physicalType": "string", "required": True},
                "value": self.prop(None, t.items, t.items_required, f"{path}{{}}"),
            }


def _branch_name(t: SchemaType) -> str:
    return (t.name or t.kind.value).rsplit(".", 1)[-1]


def to_odcs(
    models: list[SchemaModel], *, contract_id: str, version: str = "1.0.0"
) -> dict[str, Any]:
    """An ODCS contract (as a mapping, ODCS :data:`ODCS_API_VERSION`), one schema object per model.

    Args:
        models: The schemas, one schema object each (named by the model's short name).
        contract_id: The contract ``id``.
        version: The contract ``version``.

    Returns:
        The contract; ``yaml.safe_dump`` it, or pass it to ``parse_contract``.
    """
    objects = []
    limitations: list[str] = []
    for m in models:
        w = _Writer()
        short = m.name.rsplit(".", 1)[-1] or "record"
        obj: dict[str, Any] = {
            "name": short,
            "physicalName": m.name,
            "logicalType": "object",
            "physicalType": "topic",
            "properties": [w.field(f, f.name) for f in m.fields],
        }
        w.place(obj, m.losses)
        if m.description:
            obj["description"] = m.description
        objects.append(obj)
        limitations += [f"{short}: {loss}" for loss in (*m.losses, *w.losses)]
    doc: dict[str, Any] = {
        "apiVersion": ODCS_API_VERSION,
        "kind": "DataContract",
        "id": contract_id,
        "version": version,
        "status": "draft",
        "schema": objects,
    }
    sources = sorted({m.source_format for m in models if m.source_format})
    purpose = f"Generated by thalweg from {', '.join(sources) or 'a schema'}."
    doc["description"] = {"purpose": purpose}
    if limitations:
        doc["description"]["limitations"] = "Conversion losses:\n" + "\n".join(
            f"- {x}" for x in limitations
        )
    return doc
