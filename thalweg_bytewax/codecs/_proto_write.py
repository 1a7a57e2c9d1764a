"""Columnar Protobuf writer: an Arrow batch to one serialized message per row.

The Arrow shape is the one :class:`~thalweg_bytewax.codecs.ProtobufCodec` decodes to
(see docs/codecs-protobuf-json.md). Each field is written for the whole column at once:
a constant tag joined to the values' wire encoding (varints and zigzag from numpy,
fixed-width values from the Arrow buffers, length-prefixed strings and sub-messages),
empty where the field is absent (a null, an unset ``oneof`` member, a proto3 implicit
scalar at its default). Repeated fields are packed where the descriptor says so.
``Struct`` / ``Value`` / ``ListValue`` and depth-capped messages, which the decoder
renders as JSON text, are parsed back one value at a time with ``json_format``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from thalweg_bytewax.codecs._encode_errors import check_known_columns
from thalweg_bytewax.codecs._proto_fields import (
    _ARROW,
    _I64,
    _LEN,
    _US,
    _VARINT,
    _WIRE,
    _WRAPPERS,
    F,
    _cast,
    _enum_numbers,
    _fail,
    _lengths,
    _mask,
    _not_default,
    _tag,
    _wrong,
)
from thalweg_bytewax.codecs._wire import (
    EMPTY,
    body_slices,
    fixed_width,
    join,
    repeat,
    varints,
    zigzag,
)
from thalweg_bytewax.codecs.base import EncodeError

__all__ = ["write_messages"]


class _Writer:
    def __init__(self) -> None:
        self._classes: dict[str, Any] = {}

    def message(
        self, desc: Descriptor, arr: pa.StructArray, path: str, rows: np.ndarray
    ) -> pa.Array:
        """One serialized ``desc`` per row of the (null-free) struct ``arr``."""
        t = arr.type
        names = {t.field(i).name: i for i in range(t.num_fields)}
        known = {fd.name for fd in desc.fields}
        check_known_columns(
            "protobuf encoder",
            path,
            names,
            known,
            lacked_by=f"the message `{desc.full_name}`",
            remedy="drop the column",
        )
        children = arr.flatten() if t.num_fields else []
        parts: list[pa.Array] = []
        for oneof in desc.oneofs:
            members = [names[f.name] for f in oneof.fields if f.name in names]
            if len(members) > 1 and not getattr(oneof, "is_synthetic", False):
                count = sum(_mask(children[i].is_valid()).astype(np.int64) for i in members)
                over = np.flatnonzero(count > 1)
                if len(over):
                    raise _fail(
                        path or oneof.name,
                        rows,
                        int(over[0]),
                        f"oneof `{oneof.name}` has more than one member set",
                    )
        for fd in sorted(desc.fields, key=lambda f: f.number):
            sub = f"{path}.{fd.name}" if path else fd.name
            idx = names.get(fd.name)
            if idx is None:
                if fd.is_required:
                    msg = (
                        f"protobuf encoder: expected column `{sub}` (a required field); "
                        f"got columns {list(names)}; add it"
                    )
                    raise EncodeError(msg, column=sub)
                continue
            parts.append(self.field(fd, children[idx], sub, rows))
        if not parts:
            return repeat(b"", len(arr))
        return join(parts)

    def field(self, fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        if fd.is_repeated:
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                return self._map(fd, arr, path, rows)
            return self._repeated(fd, arr, path, rows)
        n = len(arr)
        valid = _mask(arr.is_valid()) if arr.null_count else np.ones(n, bool)
        if not valid.all() and not (fd.has_presence or fd.message_type is not None):
            raise _fail(
                path,
                rows,
                int(np.flatnonzero(~valid)[0]),
                "expected a value (the field has no presence); got null",
            )
        keep = np.flatnonzero(valid)
        sub = arr if len(keep) == n else arr.filter(pa.array(valid))
        enc, present = self._values(fd, sub, path, rows[keep])
        tagged = join([_tag(fd, _WIRE.get(fd.type, _VARINT)), enc])
        if present is not None:
            tagged = pc.if_else(pa.array(present), tagged, EMPTY)
        if len(keep) == n:
            return tagged
        index = np.full(n, len(keep), np.int64)
        index[keep] = np.arange(len(keep))
        return pa.concat_arrays([tagged, pa.array([b""], pa.binary())]).take(pa.array(index))

    def _values(
        self, fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray
    ) -> tuple[pa.Array, np.ndarray | None]:
        """Wire values (no tag) of non-null ``arr``, and which rows to write (``None``: all)."""
        if fd.type == F.TYPE_MESSAGE:
            assert fd.message_type is not None  # a message field always has its type
            body = self._submessage(fd.message_type, arr, path, rows)
            return join([varints(_lengths(body)), body]), None
        enc = self.scalars(fd, arr, path, rows)
        return enc, (None if fd.has_presence else _not_default(fd, enc))

    def scalars(self, fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        """The wire values of a scalar (or enum) field, one per row, without tags."""
        t = fd.type
        if t in (F.TYPE_STRING, F.TYPE_BYTES):
            target = pa.string() if t == F.TYPE_STRING else pa.binary()
            data = _cast(arr, target, path, rows).cast(pa.binary())
            return join([varints(_lengths(data)), data])
        if t == F.TYPE_ENUM:
            return varints(_enum_numbers(fd, arr, path, rows).view(np.uint64))
        values = np.asarray(_cast(arr, _ARROW[t], path, rows).to_numpy(zero_copy_only=False))
        wire = _WIRE.get(t, _VARINT)
        if wire != _VARINT:
            return fixed_width(np.ascontiguousarray(values), 8 if wire == _I64 else 4)
        if t in (F.TYPE_SINT32, F.TYPE_SINT64):
            return zigzag(values)
        if t == F.TYPE_BOOL:
            return varints(values.astype(np.uint64))
        # int32 / int64 negatives are 10-byte two's complement; uint64 as is.
        return varints(
            values.astype(np.int64).view(np.uint64) if values.dtype != np.uint64 else values
        )

    def _submessage(self, desc: Descriptor, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        name = desc.full_name
        if name in _WRAPPERS:
            inner = desc.fields_by_name["value"]
            enc = self.scalars(inner, arr, path, rows)
            tagged = join([_tag(inner, _WIRE.get(inner.type, _VARINT)), enc])
            return pc.if_else(pa.array(_not_default(inner, enc)), tagged, EMPTY)
        if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            return self._seconds_nanos(desc, arr, path, rows)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            return self._from_json(desc, arr, path, rows)  # Struct / Value, or depth-capped
        if not pa.types.is_struct(arr.type):
            raise _wrong(path, f"a struct for `{name}`", arr)
        return self.message(desc, arr, path, rows)

    def _seconds_nanos(
        self, desc: Descriptor, arr: pa.Array, path: str, rows: np.ndarray
    ) -> pa.Array:
        if pa.types.is_timestamp(arr.type):
            us = np.asarray(
                _cast(arr, pa.timestamp("us", arr.type.tz), path, rows)
                .view(pa.int64())
                .to_numpy(zero_copy_only=False)
            )
            seconds, micros = np.floor_divide(us, _US), np.mod(us, _US)
        elif pa.types.is_duration(arr.type):
            us = np.asarray(
                _cast(arr, pa.duration("us"), path, rows)
                .view(pa.int64())
                .to_numpy(zero_copy_only=False)
            )
            seconds = np.sign(us) * (np.abs(us) // _US)
            micros = us - seconds * _US
        else:
            raise _wrong(path, f"a timestamp or duration for `{desc.full_name}`", arr)
        sec_fd, nano_fd = desc.fields_by_name["seconds"], desc.fields_by_name["nanos"]
        parts = []
        for fd, vals in ((sec_fd, seconds), (nano_fd, micros * 1000)):
            enc = varints(vals.astype(np.int64).view(np.uint64))
            tagged = join([_tag(fd, _VARINT), enc])
            parts.append(pc.if_else(pa.array(vals != 0), tagged, EMPTY))
        return join(parts)

    def _from_json(self, desc: Descriptor, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        cls = self._classes.get(desc.full_name)
        if cls is None:
            cls = self._classes[desc.full_name] = message_factory.GetMessageClass(desc)
        out = []
        for i, text in enumerate(arr.to_pylist()):
            msg = cls()
            try:
                json_format.Parse(text, msg)
            except json_format.ParseError as exc:
                raise _fail(
                    path, rows, i, f"JSON text does not parse as `{desc.full_name}` ({exc})"
                ) from exc
            out.append(msg.SerializeToString())
        return pa.array(out, pa.binary())

    def _repeated(
        self, fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray
    ) -> pa.Array:
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise _wrong(path, f"a list for repeated `{fd.name}`", arr)
        if arr.null_count:
            arr = pc.if_else(arr.is_null(), pa.scalar([], arr.type), arr)  # null list = empty
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        counts = np.diff(offsets)
        items = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        item_rows = np.repeat(rows, counts)
        if items.null_count:
            bad = np.flatnonzero(~_mask(items.is_valid()))
            where = f"{path}[]"
            raise _fail(
                where,
                item_rows,
                int(bad[0]),
                "expected a value (repeated items cannot be null); got null",
            )
        rel = offsets - offsets[0]
        if fd.is_packed:
            enc = self.scalars(fd, items, f"{path}[]", item_rows)
            body = body_slices(enc, rel)
            packed = join([_tag(fd, _LEN), varints(_lengths(body)), body])
            return pc.if_else(pa.array(counts > 0), packed, EMPTY)
        enc, _ = (
            self._values(fd, items, f"{path}[]", item_rows)
            if fd.type == F.TYPE_MESSAGE
            else (self.scalars(fd, items, f"{path}[]", item_rows), None)
        )
        tagged = join([_tag(fd, _WIRE.get(fd.type, _VARINT)), enc])
        return body_slices(tagged, rel)

    def _map(self, fd: FieldDescriptor, arr: pa.Array, path: str, rows: np.ndarray) -> pa.Array:
        if not pa.types.is_map(arr.type):
            raise _wrong(path, f"a map for `{fd.name}`", arr)
        entry = fd.message_type
        assert entry is not None  # checked by the caller: a map field
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        lo, hi = int(offsets[0]), int(offsets[-1])
        item_rows = np.repeat(rows, np.diff(offsets))
        entries = pa.StructArray.from_arrays(
            [arr.keys.slice(lo, hi - lo), arr.items.slice(lo, hi - lo)], names=["key", "value"]
        )
        body = self.message(entry, entries, f"{path}{{}}", item_rows)
        tagged = join([_tag(fd, _LEN), varints(_lengths(body)), body])
        return body_slices(tagged, offsets - lo)


def write_messages(desc: Descriptor, batch: pa.RecordBatch) -> pa.BinaryArray:
    """One serialized ``desc`` per row of ``batch`` (columns named after its fields).

    Raises:
        EncodeError: When a value does not fit the message (names column and row).
    """
    if batch.num_columns:
        struct = pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
    else:
        struct = pa.array([{}] * batch.num_rows, pa.struct([]))
    rows = np.arange(batch.num_rows, dtype=np.int64)
    return _Writer().message(desc, struct, "", rows)
