"""The sample order as Protobuf: its schema, built without ``protoc``, and its encoding.

The schema mirrors :data:`~thalweg_bytewax.dev.samples.ORDER_AVRO_SCHEMA`. Protobuf has
no decimal, so money is carried as its exact decimal text (``"123.45"``); the UUID is a
string, ``created_at`` a ``google.protobuf.Timestamp``, the coupon a proto3 ``optional``
string. Descriptors are built programmatically and classes live in a private
:class:`~google.protobuf.descriptor_pool.DescriptorPool`. Every public name is importable
from :mod:`thalweg_bytewax.dev.samples`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from thalweg_bytewax.codecs.framing import encode_confluent
from thalweg_bytewax.dev import _sample_columns as _cols

__all__ = [
    "ORDER_MESSAGE_TYPE",
    "ORDER_PROTO_SCHEMA_ID",
    "encode_order_proto",
    "order_descriptor_set",
    "order_file_descriptor_proto",
    "order_message_class",
    "order_to_proto",
]

ORDER_PROTO_SCHEMA_ID = 2
"""The schema id sample Protobuf orders are framed with."""
ORDER_MESSAGE_TYPE = "thalweg.samples.Order"
"""Fully-qualified name of the order message."""

_FDP = descriptor_pb2.FieldDescriptorProto
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _field(
    name: str,
    number: int,
    ftype: _FDP.Type.ValueType,
    *,
    label: _FDP.Label.ValueType = _FDP.LABEL_OPTIONAL,
    type_name: str | None = None,
    oneof_index: int | None = None,
    proto3_optional: bool = False,
) -> descriptor_pb2.FieldDescriptorProto:
    f = _FDP(name=name, number=number, type=ftype, label=label)
    if type_name is not None:
        f.type_name = type_name
    if oneof_index is not None:
        f.oneof_index = oneof_index
    if proto3_optional:
        f.proto3_optional = True
    return f


def order_file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """The ``thalweg/samples/order.proto`` file descriptor (proto3)."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="thalweg/samples/order.proto",
        package="thalweg.samples",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    status = fdp.enum_type.add(name="OrderStatus")
    for i, sym in enumerate(_cols.STATUSES):
        status.value.add(name=sym, number=i)
    item = fdp.message_type.add(name="OrderItem")
    item.field.extend(
        [
            _field("sku", 1, _FDP.TYPE_STRING),
            _field("quantity", 2, _FDP.TYPE_INT32),
            _field("unit_price", 3, _FDP.TYPE_STRING),
        ]
    )
    addr = fdp.message_type.add(name="Address")
    addr.field.extend(
        [
            _field("line1", 1, _FDP.TYPE_STRING),
            _field("city", 2, _FDP.TYPE_STRING),
            _field("country", 3, _FDP.TYPE_STRING),
        ]
    )
    order = fdp.message_type.add(name="Order")
    order.field.extend(
        [
            _field("order_id", 1, _FDP.TYPE_STRING),
            _field("customer_id", 2, _FDP.TYPE_INT64),
            _field("created_at", 3, _FDP.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp"),
            _field("status", 4, _FDP.TYPE_ENUM, type_name=".thalweg.samples.OrderStatus"),
            _field("currency", 5, _FDP.TYPE_STRING),
            _field("total", 6, _FDP.TYPE_STRING),
            _field(
                "items",
                7,
                _FDP.TYPE_MESSAGE,
                label=_FDP.LABEL_REPEATED,
                type_name=".thalweg.samples.OrderItem",
            ),
            _field("shipping_address", 8, _FDP.TYPE_MESSAGE, type_name=".thalweg.samples.Address"),
            _field("coupon", 9, _FDP.TYPE_STRING, oneof_index=0, proto3_optional=True),
        ]
    )
    order.oneof_decl.add(name="_coupon")
    return fdp


@cache
def order_descriptor_set() -> bytes:
    """Serialized ``FileDescriptorSet`` of the order schema, imports included."""
    fds = descriptor_pb2.FileDescriptorSet()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    fds.file.append(ts)
    fds.file.append(order_file_descriptor_proto())
    return fds.SerializeToString()


@cache
def order_message_class() -> type[Any]:
    """The ``Order`` message class, built in a private descriptor pool."""
    pool = descriptor_pool.DescriptorPool()
    fds = descriptor_pb2.FileDescriptorSet.FromString(order_descriptor_set())
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(ORDER_MESSAGE_TYPE))


def order_to_proto(order: dict[str, Any]) -> Any:
    """Build an ``Order`` message from a sample order dict."""
    msg = order_message_class()()
    msg.order_id = order["order_id"]
    msg.customer_id = order["customer_id"]
    delta = order["created_at"] - _UNIX_EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    msg.created_at.seconds, rest = divmod(micros, 1_000_000)
    msg.created_at.nanos = rest * 1000
    msg.status = _cols.STATUSES.index(order["status"])
    msg.currency = order["currency"]
    msg.total = str(order["total"])
    for it in order["items"]:
        msg.items.add(sku=it["sku"], quantity=it["quantity"], unit_price=str(it["unit_price"]))
    if order["shipping_address"] is not None:
        a = order["shipping_address"]
        msg.shipping_address.line1 = a["line1"]
        msg.shipping_address.city = a["city"]
        msg.shipping_address.country = a["country"]
    if order["coupon"] is not None:
        msg.coupon = order["coupon"]
    return msg


def encode_order_proto(order: dict[str, Any], *, schema_id: int = ORDER_PROTO_SCHEMA_ID) -> bytes:
    """Encode one sample order as Confluent-framed Protobuf (message index ``[2]``).

    ``Order`` is the third top-level message of its file, so the frame carries the
    index array ``[2]``, exercising non-first message framing.
    """
    body = order_to_proto(order).SerializeToString()
    return encode_confluent(schema_id, body, message_indexes=[2])
