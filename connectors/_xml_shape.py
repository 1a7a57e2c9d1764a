"""Private to :mod:`thalweg_bytewax.connectors.files`: how an XML record maps to Arrow.

The mapping rule (docs/connectors/files.md, "XML records"):

* A record element is a row. Its attributes are fields named ``@name``, its child
  elements fields named by their local name (namespaces are dropped).
* A *simple* element (no attributes, no child elements) is its text: a string, null
  when empty (``<a/>``, ``<a></a>``).
* A *complex* element (attributes or child elements) is a struct: ``@name`` for each
  attribute, a field per child element name and, when the element holds text that is
  not only whitespace (``<amount currency="EUR">1.5</amount>``, mixed content), ``#text``:
  its text and the text after each child, joined.
* A child name that occurs more than once in a record is a list of its elements.

With ``schema="infer"`` the schema is inferred from the first window of records, every
leaf a string: a name that repeats in any record is a list, an element that is complex in
any record is a struct (a simple occurrence fills its ``#text``). With a schema given,
the schema says which names are lists and structs, and the leaves are cast to its types;
what it does not name is not read. A record that cannot be represented (a repeated name
whose field is not a list, an element with children whose field is a leaf, text where a
struct has no ``#text``, an unexpanded entity reference, a name an inferred schema does
not hold) goes to the DLQ with the field's path.

Records are turned into these nested Python values once, then into Arrow by one
``pa.array`` call per window, and cast columnar.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.types as pat

__all__ = ["TEXT", "Refused", "Shape", "conform", "raw_record", "text_schema", "typed_batch"]

TEXT = "#text"
"""The field that holds a complex element's own text."""


class Refused(Exception):  # noqa: N818 - an outcome, not a fault: the record goes to the DLQ
    """A record that the mapping rule or the schema cannot represent."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1] if tag[:1] == "{" else tag


def raw_record(elem: Any, where: str) -> dict[str, Any]:
    """A record element as nested Python values: ``{@attr: str, #text: str, name: [..]}``.

    Every child name maps to the list of its occurrences (simple ones as text or
    ``None``, complex ones as dicts), whatever the schema later makes of them.

    Raises:
        Refused: On an unexpanded entity reference, or two attributes sharing a local name.
    """
    node = _raw(elem, where)
    return node if isinstance(node, dict) else ({TEXT: node} if node else {})


def _raw(elem: Any, where: str) -> dict[str, Any] | str | None:
    attrib = elem.attrib
    children = list(elem)
    if not attrib and not children:
        text = elem.text
        return text or None
    out: dict[str, Any] = {}
    for key, value in attrib.items():
        name = "@" + _local(key)
        if name in out:
            msg = f"`{where}` has two attributes named `{name[1:]}` (in different namespaces)"
            raise Refused(msg)
        out[name] = value
    texts = [elem.text] if elem.text else []
    for child in children:
        tag = child.tag
        if not isinstance(tag, str):
            msg = (
                f"`{where}` holds the entity reference `{child.text}`, which is not expanded "
                "(entities are never resolved); replace it by its text"
            )
            raise Refused(msg)
        name = _local(tag)
        out.setdefault(name, []).append(_raw(child, f"{where}/{name}"))
        if child.tail:
            texts.append(child.tail)
    text = "".join(texts)
    if text.strip():
        out[TEXT] = text
    return out


class Shape:
    """The inferred shape of one element name: text, or a struct of named shapes."""

    __slots__ = ("fields", "repeated", "text")

    def __init__(self) -> None:
        self.text = False
        self.repeated = False
        self.fields: dict[str, Shape] | None = None

    def add(self, node: dict[str, Any] | str | None) -> None:
        """Widen the shape by one occurrence."""
        if isinstance(node, dict):
            self.add_fields(node)
        elif node is not None:
            self.text = True

    def add_fields(self, node: dict[str, Any]) -> None:
        """Widen the shape by the fields of one complex occurrence (or of a record)."""
        if self.fields is None:
            self.fields = {}
        for name, value in node.items():
            shape = self.fields.get(name)
            if shape is None:
                shape = self.fields[name] = Shape()
            if name[0] in "@#":
                shape.text = True
                continue
            if len(value) > 1:
                shape.repeated = True
            for item in value:
                shape.add(item)

    def count(self) -> int:
        """The number of fields at every level."""
        return sum(1 + s.count() for s in (self.fields or {}).values())

    def arrow_type(self) -> pa.DataType:
        """A string for text, a struct for a complex element; a list when repeated."""
        if self.fields is None:
            item: pa.DataType = pa.string()
        else:
            fields = [pa.field(n, s.arrow_type()) for n, s in self.fields.items() if n != TEXT]
            if self.text or TEXT in self.fields:
                fields.append(pa.field(TEXT, pa.string()))
            item = pa.struct(fields)
        return pa.list_(item) if self.repeated else item

    def schema(self) -> pa.Schema:
        """The record schema: this shape (a record's) as top-level fields."""
        record = self.arrow_type()
        return pa.schema(list(record)) if pat.is_struct(record) else pa.schema([])


def text_schema(schema: pa.Schema, where: str) -> pa.Schema:
    """``schema`` with every leaf a string: what records are first built as.

    Raises:
        TypeError: For a type the mapping rule cannot fill (a map, a union, ...).
    """
    return pa.schema([f.with_type(_text_type(f.type, f"{where}/{f.name}")) for f in schema])


def _text_type(t: pa.DataType, where: str) -> pa.DataType:
    if pat.is_struct(t):
        return pa.struct([f.with_type(_text_type(f.type, f"{where}/{f.name}")) for f in t])
    if pat.is_list(t) or pat.is_large_list(t):
        return pa.list_(t.value_field.with_type(_text_type(t.value_type, where)))
    if pat.is_fixed_size_list(t) or pat.is_map(t) or pat.is_union(t) or pat.is_dictionary(t):
        msg = f"field `{where}` is {t}; XML records map to structs, lists and scalars"
        raise TypeError(msg)
    return pa.string()


def conform(node: dict[str, Any], schema: pa.Schema, strict: bool, where: str) -> dict[str, Any]:
    """A raw record as the values of ``schema`` (a text schema, every leaf a string).

    Args:
        node: The record from :func:`raw_record`.
        schema: The text schema.
        strict: Refuse names the schema does not hold (an inferred schema), rather than
            not reading them (a schema given is a projection).
        where: The record's path, for messages.

    Raises:
        Refused: What the schema cannot represent, with the field's path.
    """
    return _struct(node, list(schema), strict, where)


def _struct(
    node: dict[str, Any] | str | None, fields: list[pa.Field], strict: bool, where: str
) -> dict[str, Any] | None:
    if node is None:
        return None
    if isinstance(node, str):
        if not any(f.name == TEXT for f in fields):
            msg = f"`{where}` holds text but its schema field (a struct) has no `{TEXT}` field"
            raise Refused(msg)
        return {TEXT: node}
    out: dict[str, Any] = {}
    for f in fields:
        value = node.get(f.name)
        if value is None or f.name[0] in "@#":
            out[f.name] = value
        else:
            out[f.name] = _field(value, f.type, strict, f"{where}/{f.name}")
    if strict and len(node) > len(out):
        extra = ", ".join(f"`{n}`" for n in node if n not in out)
        msg = (
            f"`{where}` holds {extra}, not in the schema inferred from the first records; "
            "pass a schema that names it"
        )
        raise Refused(msg)
    return out


def _field(items: list[Any], t: pa.DataType, strict: bool, where: str) -> Any:
    if pat.is_list(t):
        return [_one(item, t.value_type, strict, where) for item in items]
    if len(items) > 1:
        msg = (
            f"`{where}` occurs {len(items)} times; its schema field is {t}, not a list "
            "(make it a list to read every occurrence)"
        )
        raise Refused(msg)
    return _one(items[0], t, strict, where)


def _one(item: Any, t: pa.DataType, strict: bool, where: str) -> Any:
    if pat.is_struct(t):
        return _struct(item, list(t), strict, where)
    if isinstance(item, dict):
        children = [n for n in item if n[0] not in "@#"]
        if children or strict:
            what = f"child element(s) {', '.join(children)}" if children else "attributes"
            msg = (
                f"`{where}` has {what}; its schema field is {t}, not a struct "
                "(make it a struct to read them)"
            )
            raise Refused(msg)
        return item.get(TEXT)
    return item


def typed_batch(records: list[dict[str, Any]], text: pa.Schema) -> pa.RecordBatch:
    """Records (from :func:`conform`) as one batch of ``text``, ready to be cast.

    Children of a null struct are made null too, so a later cast never parses the
    placeholders Arrow leaves under a null parent.
    """
    arr = pa.array(records, pa.struct(list(text)))
    arrays = [_clean(c) for c in arr.flatten()]
    return pa.RecordBatch.from_arrays(arrays, schema=text)


def _clean(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pat.is_struct(t):
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(
            [_clean(c) for c in arr.flatten()], fields=list(t), mask=mask
        )
    if pat.is_list(t) and _has_struct(t.value_type):
        values = _clean(arr.values)
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, type=t, mask=mask)
    return arr


def _has_struct(t: pa.DataType) -> bool:
    if pat.is_struct(t):
        return True
    return pat.is_list(t) and _has_struct(t.value_type)
