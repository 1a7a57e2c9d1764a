"""Private: the writer schemas an Avro codec has met, and the output schema they make.

Each writer schema is fetched from the codec's schema source once (by registry id or
GUID), compiled and kept; a schema the source does not know yet is not kept, so it can
be registered later. Without a reader schema the newest writer seen is the output
schema, and the fields it has that an older writer lacks are nullable in it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs import _avro_fast
from thalweg_bytewax.codecs._avro_compile import compile_schema, reserved_fields
from thalweg_bytewax.codecs._avro_resolve import (
    AvroDecodeError,
    _load_json,
    _make_plan,
    _newer,
    _OneLine,
    _parse,
    _Plan,
    _ref_docs,
    _Writer,
)
from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs.base import FailureKind
from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.registry import SchemaKey, SchemaSource, UnknownSchemaError

__all__ = ["WriterSchemas"]

# The codec's logger: its schema messages keep the name users filter them by.
logger = logging.getLogger("thalweg_bytewax.codecs.avro")


class WriterSchemas:
    """The writer schemas met so far, the reader schema if any, and the output schema.

    Args:
        source: Where writer schemas come from by id or GUID (None: bare bodies only).
        metadata_prefix: The reserved metadata column prefix (a top-level field under
            it makes its schema a ``reserved_field`` failure).
        fast: Whether the polars reader may take the schemas it reads exactly.
    """

    def __init__(self, source: SchemaSource | None, *, metadata_prefix: str, fast: bool) -> None:
        self.source = source
        self.writers: dict[SchemaKey, _Writer] = {}
        self.reader: _Writer | None = None
        self._prefix = metadata_prefix
        self._fast = fast
        self._newest: _Writer | None = None
        self._optional: set[str] = set()  # newest-writer fields some older writer lacks

    def compile(self, key: SchemaKey, label: str, doc: Any, refs: Mapping[str, Any]) -> _Writer:
        """Parse and compile one schema document (a record at the top level)."""
        parsed, named = _parse(doc, refs, label)
        node = compile_schema(parsed, named)
        if node.kind != "record":
            msg = f"avro {label}: expected a record schema at the top level; got {node.avro!r}"
            raise SchemaError(msg)
        w = _Writer(key, label, parsed, node, named, doc, reserved_fields(node, self._prefix))
        if w.reserved:
            fields = ", ".join(f"`{n}`" for n in w.reserved)
            w.error = AvroDecodeError(
                f"avro {label}: field(s) {fields} fall under the reserved metadata prefix "
                f"`{self._prefix}`; rename them in the schema or configure another prefix",
                FailureKind.RESERVED_FIELD,
            )
        w.fast = self._fast and _avro_fast.supported(node)
        logger.info("avro %s: decodes to Arrow schema %s", label, _OneLine(node))
        return w

    def get(self, key: SchemaKey) -> _Writer:
        """The writer schema of ``key``, fetched from the source the first time.

        A schema the source does not know, or cannot compile, comes back with its
        ``error`` set (the records written with it fail; nothing raises).
        """
        w = self.writers.get(key)
        if w is not None:
            return w
        label = f"schema id {key}" if isinstance(key, int) else f"schema guid {key}"
        assert self.source is not None  # noqa: S101 - framing confluent always has one
        try:
            resolved = self.source.get(key)
        except UnknownSchemaError as exc:
            msg = f"avro {label}: unknown to `{self.source.description}`"
            err = AvroDecodeError(msg, FailureKind.UNKNOWN_SCHEMA)
            err.__cause__ = exc
            # Not cached: the schema may be registered later (the source caches misses
            # only as long as it chooses to).
            return _Writer(key, label, None, AvroNode("prim", pa.null(), None), {}, None, [], err)
        try:
            if resolved.schema_type != "AVRO":
                msg = (
                    f"avro {label}: expected an AVRO schema; the registry has "
                    f"{resolved.schema_type}"
                )
                raise SchemaError(msg)
            w = self.compile(key, label, _load_json(resolved.schema_str), _ref_docs(resolved))
        except SchemaError as exc:
            w = _Writer(key, label, None, AvroNode("prim", pa.null(), None), {}, None, [])
            w.error = AvroDecodeError(str(exc), FailureKind.SCHEMA_MISMATCH)
        self.writers[key] = w
        if w.error is None:
            self.see(w)
        return w

    def see(self, w: _Writer) -> None:
        """Track the newest writer (output schema without a reader schema)."""
        if self.reader is not None:
            return
        newest = self._newest
        if newest is not None and not isinstance(w.key, int) and not _newer(w, newest):
            logger.info(
                "avro: %s does not widen the output schema of %s, which stays the output",
                w.label,
                newest.label,
            )
        if newest is None or _newer(w, newest):
            old = newest
            self._newest = w
            if old is not None:
                logger.info(
                    "avro: output schema changed from %s to %s (fields now: %s)",
                    old.label,
                    w.label,
                    ", ".join(w.node.field_names),
                )
        target = self._newest
        assert target is not None  # noqa: S101 - set just above
        for other in self.writers.values():
            if other.error is None and other is not target:
                self._optional |= set(target.node.field_names) - set(other.node.field_names)
        if w is not target:
            self._optional |= set(target.node.field_names) - set(w.node.field_names)

    @property
    def target(self) -> _Writer | None:
        """The output schema's writer: the reader schema, else the newest writer seen."""
        return self.reader or self._newest

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the output (see :attr:`AvroCodec.arrow_schema`).

        Raises:
            SchemaError: When there is no reader schema and no writer schema seen yet.
        """
        target = self.target
        if target is None:
            msg = "avro codec: no writer schema seen yet; pass reader_schema= or decode first"
            raise SchemaError(msg)
        fields = [
            c.arrow_field(n)
            for n, c in zip(target.node.field_names, target.node.children, strict=False)
        ]
        if self.reader is None:
            fields = [f.with_nullable(True) if f.name in self._optional else f for f in fields]
        return pa.schema(fields)

    def plan(self, w: _Writer) -> _Plan:
        """How ``w``'s records map onto the output schema."""
        target = self.target
        assert target is not None  # noqa: S101 - a writer was seen
        return _make_plan(w, target, self.reader)
