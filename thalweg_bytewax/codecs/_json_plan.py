"""Private: what :class:`~thalweg_bytewax.codecs.json.JsonCodec` decodes a shape with.

A resolved :class:`~thalweg_bytewax.codecs._json_schema.JsonShape` compiles once into a
:class:`JsonPlan`: the record-at-a-time converter, the Arrow schemas the columnar
readers parse to and cast through, ``pyarrow.json``'s parse options, the native reader
where it can fill the schema, and whether batches are columnar at all (``pyarrow.json``
cannot read maps). :func:`infer_shape` is the ``schema="infer"`` fallback's shape from a
sample of documents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.json as pj

from thalweg_bytewax.codecs._json_arrow import _cast_type, _has_map, _wire_type
from thalweg_bytewax.codecs._json_columnar import inferred_schema
from thalweg_bytewax.codecs._json_fast import NativeReader, Unsupported
from thalweg_bytewax.codecs._json_schema import JsonShape, shape_from_arrow
from thalweg_bytewax.codecs._json_values import compile_record, parse_type

__all__ = ["JsonPlan", "compile_plan", "infer_shape", "sample_objects"]

logger = logging.getLogger("thalweg_bytewax.codecs.json")


@dataclass(frozen=True)
class JsonPlan:
    """A shape compiled for decoding.

    Attributes:
        convert: One parsed document to its row (the record-at-a-time path).
        wire: The schema the columnar readers parse to.
        cast: The schema a parsed batch is cast through to the shape's types.
        parsed: The cast schema with the types text values are parsed as.
        parse: ``pyarrow.json``'s options (the wire schema; unknown fields refused
            when the shape is strict).
        reserved: The shape's field names under the metadata prefix.
        reader: The native reader, None when not asked for or unable to fill the schema.
        columnar: Whether batches decode column by column.
    """

    convert: Callable[[dict[str, Any]], Any]
    wire: pa.Schema
    cast: pa.Schema
    parsed: pa.Schema
    parse: pj.ParseOptions
    reserved: list[str]
    reader: NativeReader | None
    columnar: bool


def compile_plan(shape: JsonShape, *, native: bool, prefix: str) -> JsonPlan:
    """Compile ``shape``; ``native`` asks for the native reader. Logs the resolved schema."""
    fields = list(shape.schema)
    convert = compile_record(shape.schema, strict=shape.strict)
    wire = pa.schema([pa.field(f.name, _wire_type(f.type)) for f in fields])
    reader = None
    if native:
        try:
            reader = NativeReader(wire, strict=shape.strict, prefix=prefix)
        except Unsupported as exc:
            logger.warning(
                "json codec: the native reader cannot fill %s; batches go through "
                "pyarrow.json (slower)",
                exc,
            )
    columnar = reader is not None or not any(_has_map(f.type) for f in fields)
    if not columnar:
        logger.warning(
            "json codec: the schema has map fields, which pyarrow.json cannot read; "
            "batches decode record by record through orjson (slower)"
        )
    logger.info(
        "resolved json decode schema: %s",
        shape.schema.to_string(show_schema_metadata=False).replace("\n", "; "),
    )
    return JsonPlan(
        convert=convert,
        wire=wire,
        cast=pa.schema([pa.field(f.name, _cast_type(f.type)) for f in fields]),
        parsed=pa.schema([pa.field(f.name, _cast_type(f.type, parse_type)) for f in fields]),
        parse=pj.ParseOptions(
            explicit_schema=wire,
            unexpected_field_behavior="error" if shape.strict else "ignore",
        ),
        reserved=[n for n in shape.schema.names if n.startswith(prefix)],
        reader=reader,
        columnar=columnar,
    )


def infer_shape(docs: list[dict[str, Any]]) -> JsonShape:
    """The shape inferred from a sample of documents; the first decides if they disagree."""
    try:
        schema = inferred_schema(docs)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        # The sample disagrees with itself (`{"a": 1}` then `{"a": "x"}`): the
        # first document decides, and the rows that do not fit it are failures.
        logger.warning(
            "json codec: the inference sample's documents disagree (%s); the schema "
            "is inferred from the first one",
            str(exc).split("\n")[0],
        )
        schema = inferred_schema(docs[:1])
    return shape_from_arrow(schema)


def sample_objects(bodies: list[bytes]) -> list[dict[str, Any]]:
    """The bodies that ``orjson`` reads as one object (the inference sample)."""
    docs = []
    for body in bodies:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            continue
        if type(doc) is dict:
            docs.append(doc)
    return docs
