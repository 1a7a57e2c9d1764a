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

Each record element is turned into nested Python values in one walk (a :class:`Plan`
compiled once from the schema), a window of them into Arrow by one ``pa.array`` call,
and the window is cast columnar.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.types as pat

__all__ = ["TEXT", "Plan", "Refused", "Shape", "local", "text_schema", "typed_batch"]

TEXT = "#text"
"""The field that holds a complex element's own text."""


class Refused(Exception):  # noqa: N818 - an outcome, not a fault: the record goes to the DLQ
    """A record that the mapping rule or the schema cannot represent."""


def local(tag: str) -> str:
    """An element or attribute name without its namespace."""
    return tag.rsplit("}", 1)[-1] if tag[:1] == "{" else tag


def _own_text(elem: Any) -> str | None:
    """A complex element's text and the text after each child, unless only whitespace."""
    texts = [elem.text] if elem.text else []
    texts += [c.tail for c in elem if c.tail]
    text = "".join(texts)
    return text if text.strip() else None


class Shape:
    """The inferred shape of one element name: text, or a struct of named shapes."""

    __slots__ = ("fields", "repeated", "text")

    def __init__(self) -> None:
        self.text = False
        self.repeated = False
        self.fields: dict[str, Shape] | None = None

    def add(self, elem: Any) -> None:
        """Widen the shape by one occurrence of the element."""
        if elem.attrib or (len(elem) and any(isinstance(c.tag, str) for c in elem)):
            self.add_fields(elem)
        elif elem.text:
            self.text = True

    def add_fields(self, elem: Any) -> None:
        """Widen the shape by the attributes, children and text of one complex element."""
        if self.fields is None:
            self.fields = {}
        fields = self.fields
        for key in elem.attrib:
            fields.setdefault("@" + local(key), Shape()).text = True
        seen: set[str] = set()
        for child in elem:
            tag = child.tag
            if not isinstance(tag, str):
                continue  # an entity reference: the record is refused when it is read
            name = tag if tag[0] != "{" else tag.rsplit("}", 1)[1]
            shape = fields.get(name)
            if shape is None:
                shape = fields[name] = Shape()
            if name in seen:
                shape.repeated = True
            seen.add(name)
            shape.add(child)
        if _own_text(elem) is not None:
            fields.setdefault(TEXT, Shape()).text = True

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


class Plan:
    """How the elements of one struct (or of the record) become values of a text schema.

    Args:
        fields: The struct's fields (of the schema given, or of the inferred one); only
            which are lists and structs matters, leaves are read as text.
        strict: Refuse what the fields do not name (an inferred schema), rather than
            not read it (a schema given is a projection).
        where: The element's path, for messages.
    """

    __slots__ = ("attrs", "kids", "strict", "text", "where")

    def __init__(self, fields: list[pa.Field], strict: bool, where: str) -> None:
        self.where = where
        self.strict = strict
        self.text = False
        self.attrs: dict[str, str] = {}
        self.kids: dict[str, tuple[bool, Plan | None, str]] = {}
        for f in fields:
            if f.name == TEXT:
                self.text = True
            elif f.name.startswith("@"):
                self.attrs[f.name[1:]] = f.name
            else:
                many = pat.is_list(f.type) or pat.is_large_list(f.type)
                item = f.type.value_type if many else f.type
                sub = Plan(list(item), strict, f"{where}/{f.name}") if pat.is_struct(item) else None
                self.kids[f.name] = (many, sub, str(f.type))

    def record(self, elem: Any) -> dict[str, Any]:
        """One record element as a row.

        Raises:
            Refused: What the fields cannot represent, with the element's path.
        """
        return self._complex(elem)

    def struct(self, elem: Any) -> dict[str, Any] | None:
        """One occurrence of a struct-typed element: null when empty."""
        if elem.attrib or len(elem):
            return self._complex(elem)
        text = elem.text
        if not text:
            return None
        if not self.text:
            msg = f"`{self.where}` holds text but its schema field (a struct) has no `{TEXT}` field"
            raise Refused(msg)
        return {TEXT: text}

    def _complex(self, elem: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        attrib = elem.attrib
        if attrib:
            self._attributes(attrib, out)
        kids, strict = self.kids, self.strict
        want_text = self.text or strict
        texts = [elem.text] if want_text and elem.text else []
        for child in elem:
            tag = child.tag
            if not isinstance(tag, str):
                raise Refused(self._entity(child))
            if want_text:
                tail = child.tail
                if tail:
                    texts.append(tail)
            name = tag if tag[0] != "{" else tag.rsplit("}", 1)[1]
            spec = kids.get(name)
            if spec is None:
                if strict:
                    raise Refused(self._unknown(f"the element `{name}`"))
                continue
            many, sub, type_name = spec
            value: Any
            if sub is not None:
                value = sub.struct(child)
            elif len(child) or (strict and child.attrib):
                value = self._leaf(child, name, type_name)
            else:
                value = child.text or None
            if many:
                items = out.get(name)
                if items is None:
                    out[name] = [value]
                else:
                    items.append(value)
            elif name in out:
                count = sum(1 for c in elem if isinstance(c.tag, str) and local(c.tag) == name)
                msg = (
                    f"`{self.where}/{name}` occurs {count} times; its schema field is "
                    f"{type_name}, not a list (make it a list to read every occurrence)"
                )
                raise Refused(msg)
            else:
                out[name] = value
        if texts:
            text = "".join(texts)
            if text.strip():
                if not self.text:
                    raise Refused(self._unknown(f"the text {text[:40]!r}"))
                out[TEXT] = text
        return out

    def _attributes(self, attrib: Any, out: dict[str, Any]) -> None:
        for key, value in attrib.items():
            bare = local(key)
            name = self.attrs.get(bare)
            if name is None:
                if self.strict:
                    raise Refused(self._unknown(f"the attribute `{bare}`"))
                continue
            if name in out:
                msg = f"`{self.where}` has two attributes named `{bare}` (in different namespaces)"
                raise Refused(msg)
            out[name] = value

    def _leaf(self, child: Any, name: str, type_name: str) -> str | None:
        if len(child):
            for grand in child:
                if not isinstance(grand.tag, str):
                    raise Refused(self._entity(grand))
            names = ", ".join(dict.fromkeys(local(g.tag) for g in child))
            msg = (
                f"`{self.where}/{name}` has child element(s) {names}; its schema field is "
                f"{type_name}, not a struct (make it a struct to read them)"
            )
            raise Refused(msg)
        if self.strict and child.attrib:
            msg = (
                f"`{self.where}/{name}` has attributes; in the schema inferred from the "
                "first records it is text (pass a schema that makes it a struct)"
            )
            raise Refused(msg)
        text: str | None = child.text
        return text or None

    def _unknown(self, what: str) -> str:
        return (
            f"`{self.where}` holds {what}, not in the schema inferred from the first "
            "records; pass a schema that names it"
        )

    def _entity(self, node: Any) -> str:
        return (
            f"`{self.where}` holds the entity reference `{node.text}`, which is not expanded "
            "(entities are never resolved); replace it by its text"
        )


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


def typed_batch(records: list[dict[str, Any]], text: pa.Schema) -> pa.RecordBatch:
    """Rows (from :meth:`Plan.record`) as one batch of ``text``, ready to be cast.

    Children of a null struct are made null too, so a later cast never parses the
    placeholders Arrow leaves under a null parent. A record without any field is still
    a row (of no columns).
    """
    arr = pa.array(records, pa.struct(list(text)))
    return pa.RecordBatch.from_struct_array(_clean(arr))


def _clean(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pat.is_struct(t) and t.num_fields:
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
