"""Protobuf message descriptors -> the neutral schema model (the codec's mapping).

Scalars keep their width and sign; enums keep their symbols; maps, repeated fields
and messages nest; wrappers are nullable scalars; ``Timestamp`` is a UTC timestamp
(microseconds) and ``Duration`` a duration; ``Struct`` / ``Value`` / ``ListValue`` are
JSON text. Field numbers and ``oneof`` grouping have no place in the model and are
named in its losses; a recursive message is JSON text past its first repetition.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from thalweg_bytewax.schemamodel._model import Kind, SchemaField, SchemaModel, SchemaType

__all__ = ["from_protobuf"]

_FD = FieldDescriptor
_SCALARS = {
    _FD.TYPE_DOUBLE: Kind.FLOAT64,
    _FD.TYPE_FLOAT: Kind.FLOAT32,
    _FD.TYPE_INT64: Kind.INT64,
    _FD.TYPE_SINT64: Kind.INT64,
    _FD.TYPE_SFIXED64: Kind.INT64,
    _FD.TYPE_UINT64: Kind.UINT64,
    _FD.TYPE_FIXED64: Kind.UINT64,
    _FD.TYPE_INT32: Kind.INT32,
    _FD.TYPE_SINT32: Kind.INT32,
    _FD.TYPE_SFIXED32: Kind.INT32,
    _FD.TYPE_UINT32: Kind.UINT32,
    _FD.TYPE_FIXED32: Kind.UINT32,
    _FD.TYPE_BOOL: Kind.BOOLEAN,
    _FD.TYPE_STRING: Kind.STRING,
    _FD.TYPE_BYTES: Kind.BYTES,
}
_WRAPPERS = {
    "google.protobuf.DoubleValue": Kind.FLOAT64,
    "google.protobuf.FloatValue": Kind.FLOAT32,
    "google.protobuf.Int64Value": Kind.INT64,
    "google.protobuf.UInt64Value": Kind.UINT64,
    "google.protobuf.Int32Value": Kind.INT32,
    "google.protobuf.UInt32Value": Kind.UINT32,
    "google.protobuf.BoolValue": Kind.BOOLEAN,
    "google.protobuf.StringValue": Kind.STRING,
    "google.protobuf.BytesValue": Kind.BYTES,
}
_JSON = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


class _Reader:
    def __init__(self) -> None:
        self.losses: list[str] = []

    def element(self, fd: FieldDescriptor, path: str, stack: tuple[str, ...]) -> SchemaType:
        if fd.type == _FD.TYPE_ENUM:
            assert fd.enum_type is not None  # set on every enum field
            return SchemaType(
                Kind.ENUM,
                name=fd.enum_type.full_name,
                symbols=tuple(v.name for v in fd.enum_type.values),
            )
        if fd.type not in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
            return SchemaType(_SCALARS[fd.type])
        msg = fd.message_type
        assert msg is not None  # set on every message field
        name = msg.full_name
        if name in _WRAPPERS:
            return SchemaType(_WRAPPERS[name])
        if name == "google.protobuf.Timestamp":
            return SchemaType(Kind.TIMESTAMP_MICROS)
        if name == "google.protobuf.Duration":
            return SchemaType(Kind.DURATION)
        if name in _JSON:
            return SchemaType(Kind.JSON, name=name)
        if name in stack:
            self.losses.append(f"{path}: recursive `{name}` is JSON text here")
            return SchemaType(Kind.JSON, name=name)
        return SchemaType(Kind.OBJECT, name=name, fields=self.fields(msg, path, (*stack, name)))

    def fields(
        self, desc: Descriptor, path: str, stack: tuple[str, ...]
    ) -> tuple[SchemaField, ...]:
        out: list[SchemaField] = []
        for fd in desc.fields:
            sub = f"{path}.{fd.name}" if path else fd.name
            if fd.containing_oneof is not None and not fd.containing_oneof.name.startswith("_"):
                self.losses.append(
                    f"{sub}: member of oneof `{fd.containing_oneof.name}` (exclusivity lost)"
                )
            entry = fd.message_type if fd.is_repeated and fd.type == _FD.TYPE_MESSAGE else None
            if entry is not None and entry.GetOptions().map_entry:
                val = self.element(entry.fields_by_name["value"], sub, stack)
                out.append(SchemaField(fd.name, SchemaType(Kind.MAP, items=val), True))
                continue
            t = self.element(fd, sub, stack)
            if fd.is_repeated:
                out.append(SchemaField(fd.name, SchemaType(Kind.ARRAY, items=t), True))
            else:
                nullable = fd.has_presence and not fd.is_required
                out.append(SchemaField(fd.name, t, not nullable))
        return tuple(out)


def from_protobuf(desc: Descriptor) -> SchemaModel:
    """The neutral model of a Protobuf message (from its descriptor)."""
    reader = _Reader()
    fields = reader.fields(desc, "", (desc.full_name,))
    return SchemaModel(
        name=desc.full_name,
        fields=fields,
        source_format="protobuf",
        losses=("field numbers are not kept", *reader.losses),
    )
