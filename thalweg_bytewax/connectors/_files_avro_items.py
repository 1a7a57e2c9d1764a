"""Private to :mod:`thalweg_bytewax.connectors.files`: Avro bodies with zero-width items.

An array whose items take no bytes (``{"type": "array", "items": "null"}``, a record of
``null`` fields, a ``fixed`` of size 0) declares its item count in a block count that
costs a few bytes whatever its value: a reader that materialises each item (fastavro
does) loops ``2**62`` times over no bytes. For a writer schema that has such an array,
a block's record bodies are split here instead of by fastavro: the bodies are walked
per the schema, an item that takes no bytes is counted without being read, and the
block's items of zero-width-capable arrays are capped before any decoder sees them.
Every other array and every map entry takes one byte at least (a map entry has a key),
so its count is bounded by the bytes of its block and is checked against them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._files_limits import over_limit

__all__ = ["ItemWalker", "has_zero_width_items"]


class _Stop(Exception):
    """The body cannot be walked past this point; the message says why."""


def _named(parsed: Any) -> dict[str, Any]:
    return parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}


def _kind(schema: Any, named: dict[str, Any]) -> tuple[str, Any]:
    """The schema's type name and the schema itself, named references resolved."""
    while True:
        if isinstance(schema, list):
            return "union", schema
        if isinstance(schema, str):
            if schema in named:
                schema = named[schema]
                continue
            return schema, schema
        kind = schema.get("type")
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
            schema = kind
            continue
        return str(kind), schema


def _zero(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether every value of ``schema`` takes exactly zero bytes."""
    kind, s = _kind(schema, named)
    if kind == "null":
        return True
    if kind == "fixed":
        return int(s.get("size", 0)) == 0
    if kind == "record":
        name = s.get("name", "")
        if name in seen:
            return False
        return all(_zero(f["type"], named, seen | {name}) for f in s["fields"])
    return False


def has_zero_width_items(parsed: Any) -> bool:
    """Whether a parsed writer schema reaches an array whose items can take no bytes."""
    named = _named(parsed)
    seen: set[int] = set()

    def walk(schema: Any) -> bool:
        kind, s = _kind(schema, named)
        if id(s) in seen:
            return False
        seen.add(id(s))
        if kind == "union":
            return any(walk(b) for b in s)
        if kind == "record":
            return any(walk(f["type"]) for f in s["fields"])
        if kind == "map":
            return walk(s["values"])
        if kind == "array":
            return _zero(s["items"], named) or walk(s["items"])
        return False

    return walk(parsed)


_FIXED = {"float": 4, "double": 8}

_Walk = Callable[[], None]


class ItemWalker:
    """Splits a block's data into record bodies, capping its zero-width array items.

    The schema is compiled once into one small function per schema node, so walking a
    value resolves no type names; each function moves the position past its value.
    """

    def __init__(self, parsed: Any, max_items: int) -> None:
        self._named = _named(parsed)
        self._max = max_items
        self._items = 0
        self._data = b""
        self._pos = 0
        self._walk = self._compile(parsed, {})

    def split(self, data: bytes, count: int) -> tuple[list[bytes], str | None]:
        """The record bodies of one block, and why splitting stopped early (if it did)."""
        self._data, self._pos, self._items = data, 0, 0
        bodies: list[bytes] = []
        walk = self._walk
        for _ in range(count):
            at = self._pos
            try:
                walk()
            except _Stop as exc:
                return bodies, str(exc)
            except RecursionError:  # a recursive type nested deeper than Python's stack
                return bodies, "values nested too deep to walk"
            bodies.append(data[at : self._pos])
        if self._pos != len(data):
            return bodies, f"{len(data) - self._pos} byte(s) left after {count} records"
        return bodies, None

    def _compile(self, schema: Any, done: dict[int, list[_Walk]]) -> _Walk:
        kind, s = _kind(schema, self._named)
        seen = done.get(id(s))
        if seen is not None:  # a named type seen before, maybe one being compiled
            if seen:
                return seen[0]

            def later() -> None:  # a recursive reference: compiled by the time it runs
                seen[0]()

            return later
        slot: list[_Walk] = []
        done[id(s)] = slot
        slot.append(self._compiled(kind, s, done))
        return slot[0]

    def _compiled(self, kind: str, s: Any, done: dict[int, list[_Walk]]) -> _Walk:
        if kind == "null":
            return _nothing
        if kind == "boolean":
            return lambda: self._skip(1, "a boolean")
        if kind in ("int", "long", "enum"):
            return self._varint
        if kind in _FIXED:
            width, what = _FIXED[kind], f"a {kind}"
            return lambda: self._skip(width, what)
        if kind in ("bytes", "string"):
            what = f"a {kind}"
            return lambda: self._skip(self._long(), what)
        if kind == "fixed":
            size = int(s["size"])
            return lambda: self._skip(size, "a fixed")
        if kind == "union":
            return self._union([self._compile(b, done) for b in s])
        if kind == "record":
            walks = [
                self._compile(f["type"], done)
                for f in s["fields"]
                if not _zero(f["type"], self._named)
            ]

            def record() -> None:
                for w in walks:
                    w()

            return record
        if kind == "array":
            zero = _zero(s["items"], self._named)
            item = _nothing if zero else self._compile(s["items"], done)
            return lambda: self._repeated(item, None, zero=zero)
        if kind == "map":
            value = self._compile(s["values"], done)
            key = self._compile("string", done)
            return lambda: self._repeated(value, key, zero=False)
        msg = f"Avro type {kind!r} is not known"

        def unknown() -> None:
            raise _Stop(msg)

        return unknown

    def _union(self, branches: list[_Walk]) -> _Walk:
        def walk() -> None:
            branch = self._long()
            if not 0 <= branch < len(branches):
                msg = f"union branch {branch} of {len(branches)}"
                raise _Stop(msg)
            branches[branch]()

        return walk

    def _varint(self) -> None:
        self._long()

    def _long(self) -> int:
        data, pos, shift, acc = self._data, self._pos, 0, 0
        while True:
            if pos >= len(data):
                msg = "a varint past the end of the block"
                raise _Stop(msg)
            b = data[pos]
            pos += 1
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                self._pos = pos
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
            if shift > 63:
                msg = "varint longer than 10 bytes"
                raise _Stop(msg)

    def _skip(self, n: int, what: str) -> None:
        if n < 0 or n > len(self._data) - self._pos:
            msg = f"{what} of {n} byte(s) with {len(self._data) - self._pos} left in the block"
            raise _Stop(msg)
        self._pos += n

    def _repeated(self, item: _Walk, key: _Walk | None, *, zero: bool) -> None:
        """An array's or map's blocks of items, each block's count checked first."""
        while (n := self._long()) != 0:
            if n < 0:
                n = -n
                self._long()  # the block's byte size: not needed to walk it
            if zero:
                self._items += n
                if self._items > self._max:
                    what = f"more than {self._max:,} zero-width array items in one block"
                    raise _Stop(over_limit("max_block_records", self._max, what))
                continue
            left = len(self._data) - self._pos
            if n > left:  # every item or entry here takes one byte at least
                msg = f"an array or map block of {n:,} items with {left:,} byte(s) left"
                raise _Stop(msg)
            for _ in range(n):
                if key is not None:
                    key()
                item()


def _nothing() -> None:
    """A value of zero bytes: nothing to walk."""
