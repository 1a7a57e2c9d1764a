"""The Avro schema tree's nodes, and the value conversions both decode paths share.

An Avro schema (as parsed by fastavro) is compiled once into a tree of :class:`AvroNode`;
each node knows its exact Arrow type, how to normalise a fastavro value for
``decode_value`` and how to build an Arrow array from a column of fastavro values for
the exact ``decode_batch`` path. The fast path casts polars' output to the same types.
The schema is compiled by :mod:`thalweg_bytewax.codecs._avro_compile`, which holds the
Avro → Arrow type mapping (see docs/codecs-avro.md).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError

__all__ = ["AvroNode"]

_INT32 = (-(2**31), 2**31 - 1)


@dataclass
class AvroNode:
    """One compiled Avro type: its Arrow type and how to convert values to it.

    ``kind`` is one of ``prim``, ``uuid``, ``enum``, ``fixed``, ``decimal``, ``record``,
    ``array``, ``map``, ``nullable`` (``["null", T]``; ``children[0]`` is ``T``) and
    ``union``. ``simple`` is true when ``pa.array(values, type)`` builds the column from
    fastavro values unchanged, so no per-value Python work is needed.
    """

    kind: str
    arrow: pa.DataType
    avro: Any
    name: str = ""
    children: list[AvroNode] = field(default_factory=list)
    field_names: list[str] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    size: int = 0
    simple: bool = True

    @property
    def nullable(self) -> bool:
        """Whether values of this type may be null."""
        return (
            self.kind == "nullable"
            or pa.types.is_null(self.arrow)
            or (self.kind == "union" and any(c.arrow == pa.null() for c in self.children))
        )

    def arrow_field(self, name: str) -> pa.Field:
        """An Arrow field of this type (nullable exactly when the Avro type is)."""
        return pa.field(name, self.arrow, nullable=self.nullable)

    # -- record-at-a-time ----------------------------------------------------------

    def normalize(self, value: Any) -> Any:
        """A fastavro value as ``decode_value`` returns it (uuid as text, no union tags)."""
        if self.simple or value is None:
            return _untag(value)
        kind = self.kind
        if kind == "uuid":
            return str(value)
        if kind == "record":
            return {
                n: c.normalize(value[n])
                for n, c in zip(self.field_names, self.children, strict=False)
            }
        if kind == "array":
            item = self.children[0]
            return [item.normalize(v) for v in value]
        if kind == "map":
            val = self.children[0]
            return {k: val.normalize(v) for k, v in value.items()}
        if kind == "nullable":
            return self.children[0].normalize(value)
        if kind == "union":
            branch = self.branch_of(value)
            return self.children[branch].normalize(_untag(value))
        return value

    def branch_of(self, value: Any) -> int:
        """Which union branch a fastavro value belongs to (first branch that accepts it).

        Named branches come tagged ``(name, value)`` from fastavro when a union has more
        than one named type; otherwise the value's Python type decides. Unions with two
        branches that accept the same kind of value are refused when compiled, so the
        first branch that accepts a value is the one it was written with.
        """
        if isinstance(value, tuple):
            name = value[0]
            for i, c in enumerate(self.children):
                if c.name == name or c.name.rsplit(".", 1)[-1] == name:
                    return i
            value = value[1]
        for i, c in enumerate(self.children):
            if c.accepts(value):
                return i
        msg = f"avro: value of type {type(value).__name__} matches no branch of union {self.avro!r}"
        raise SchemaError(msg)

    def accepts(self, v: Any) -> bool:  # noqa: PLR0911 - one branch per Arrow type family
        """Whether a fastavro value could be of this type (union branch inference)."""
        t = self.arrow
        if v is None:
            return pa.types.is_null(t) or self.nullable
        if self.kind == "enum":
            return isinstance(v, str) and v in self.symbols
        if pa.types.is_boolean(t):
            return isinstance(v, bool)
        if pa.types.is_int32(t):
            return isinstance(v, int) and not isinstance(v, bool) and _INT32[0] <= v <= _INT32[1]
        if pa.types.is_int64(t):
            return isinstance(v, int) and not isinstance(v, bool)
        if pa.types.is_floating(t):
            return isinstance(v, float)
        if pa.types.is_string(t):
            return isinstance(v, str | uuid.UUID)
        if pa.types.is_binary(t):
            return isinstance(v, bytes)
        if pa.types.is_fixed_size_binary(t):
            return isinstance(v, bytes) and len(v) == self.size
        if pa.types.is_decimal(t):
            return isinstance(v, Decimal)
        if pa.types.is_timestamp(t):
            return isinstance(v, dt.datetime) and ((v.tzinfo is None) == (t.tz is None))
        if pa.types.is_date(t):
            return isinstance(v, dt.date) and not isinstance(v, dt.datetime)
        if pa.types.is_time(t):
            return isinstance(v, dt.time)
        if self.kind == "record":
            return isinstance(v, dict) and set(v) == set(self.field_names)
        if self.kind == "map":
            return isinstance(v, dict)
        if self.kind == "array":
            return isinstance(v, list)
        if self.kind == "nullable":
            return self.children[0].accepts(v)
        return False

    # -- columnar ------------------------------------------------------------------

    def build(self, values: Sequence[Any]) -> pa.Array:
        """An Arrow array of :attr:`arrow` type from a column of fastavro values."""
        if self.simple:
            return pa.array(values, type=self.arrow)
        kind = self.kind
        if kind == "uuid":
            return pa.array([None if v is None else str(v) for v in values], pa.string())
        if kind == "nullable":
            return self.children[0].build(values)
        mask = pa.array([v is None for v in values], pa.bool_())
        has_nulls = mask.true_count > 0 if len(values) else False
        if kind == "record":
            children = [
                c.build([None if v is None else v[n] for v in values])
                for n, c in zip(self.field_names, self.children, strict=False)
            ]
            fields = [
                c.arrow_field(n) for n, c in zip(self.field_names, self.children, strict=False)
            ]
            return pa.StructArray.from_arrays(
                children, fields=fields, mask=mask if has_nulls else None
            )
        if kind in ("array", "map"):
            offsets = [0]
            flat: list[Any] = []
            for v in values:
                if v is not None:
                    flat.extend(v.items() if kind == "map" else v)
                offsets.append(len(flat))
            off = pa.array(offsets, pa.int32())
            if kind == "array":
                return pa.ListArray.from_arrays(
                    off,
                    self.children[0].build(flat),
                    type=self.arrow,
                    mask=mask if has_nulls else None,
                )
            keys = pa.array([k for k, _ in flat], pa.string())
            items = self.children[0].build([x for _, x in flat])
            return pa.MapArray.from_arrays(
                off, keys, items, type=self.arrow, mask=mask if has_nulls else None
            )
        # dense union: group the values by branch, one child array per branch
        codes: list[int] = []
        offsets = []
        per_branch: list[list[Any]] = [[] for _ in self.children]
        for v in values:
            b = self.branch_of(v)
            codes.append(b)
            offsets.append(len(per_branch[b]))
            per_branch[b].append(_untag(v))
        children = [c.build(vals) for c, vals in zip(self.children, per_branch, strict=False)]
        return pa.UnionArray.from_dense(
            pa.array(codes, pa.int8()),
            pa.array(offsets, pa.int32()),
            children,
            [f.name for f in self.arrow],
            list(range(len(self.children))),
        )


def _untag(value: Any) -> Any:
    if isinstance(value, tuple):
        return value[1]
    return value
