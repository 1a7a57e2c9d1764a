"""The Avro columnar fast path: one in-memory Object Container File, read by polars.

The Avro bodies of one batch that share a writer schema are concatenated into a single
OCF block and decoded by ``polars.read_avro`` (~14x faster here than fastavro per record
plus ``from_pylist``; see docs/codecs-avro.md). polars has hard limits, so this path is
used only when it can be proven exact:

* only for schemas inside :func:`supported` — no maps, no unions other than
  ``["null", T]``, enums only as top-level fields, decimals up to 18 digits, no
  recursive types (maps and nested enums panic, other unions are rejected);
* ``default`` attributes are stripped from the schema given to polars (a non-null
  default fails to parse there; decoding never needs a writer's defaults);
* one block per writer schema (mixing writer schemas in one block returns wrong data
  without an error);
* any ``Exception`` (except ``MemoryError``) and polars' ``PanicException``, which is
  not an ``Exception``, return ``None`` and the caller decodes the group on the exact
  path; ``KeyboardInterrupt``, ``SystemExit`` and ``MemoryError`` propagate;
* **record boundaries are verified**: polars reads the block as one byte stream, so a
  truncated body would shift every record after it. After decoding, the encoded size of
  every row is recomputed from the decoded columns (vectorised) and must equal the body
  length of that payload; any difference falls back to the exact path. With every
  boundary proven, each row was decoded from exactly its own bytes.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._avro_canonical import (
    has_tags,
    noncanonical_tags,
    tag_errors,
    uuids_canonical,
)
from thalweg_bytewax.codecs._avro_sizes import int_values, value_sizes
from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs._nulls import required_children

__all__ = [
    "available",
    "cast_exact",
    "decode_block",
    "has_tags",
    "noncanonical_tags",
    "ocf_header",
    "ocf_schema_json",
    "supported",
    "tag_errors",
]

_SYNC = os.urandom(16)
_MAX_FAST_DECIMAL_PRECISION = 18  # unscaled values fit int64, so sizes stay vectorised
_polars: Any = None
# polars' panic type (a BaseException), set when polars loads; until then nothing polars
# raises can reach an ``except``, so plain ``Exception`` stands in.
_PanicException: type[BaseException] = Exception


def _load_polars() -> Any:
    global _polars, _PanicException  # noqa: PLW0603 - lazy optional import, once per process
    if _polars is None:
        try:
            import polars  # noqa: PLC0415 - optional extra `fast`
            from polars.exceptions import PanicException  # noqa: PLC0415
        except ImportError:
            _polars = False
        else:
            _PanicException = PanicException
            _polars = polars
    return _polars or None


def available() -> bool:
    """Whether polars (the ``fast`` extra) is importable."""
    return _load_polars() is not None


def supported(node: AvroNode, *, top: bool = True) -> bool:
    """Whether the fast path is proven exact for this (writer) schema."""
    kind = node.kind
    if kind == "record":
        # An enum is fast only as a direct field of the top-level record.
        return all(top if c.kind == "enum" else supported(c, top=False) for c in node.children)
    if kind == "prim":
        return not pa.types.is_null(node.arrow)
    if kind in ("uuid", "fixed"):
        return True
    if kind == "decimal":
        precision: int = node.arrow.precision
        return precision <= _MAX_FAST_DECIMAL_PRECISION
    if kind == "enum":
        return top
    if kind == "array":
        c = node.children[0]
        return c.kind != "enum" and supported(c, top=False)
    if kind == "nullable":
        c = node.children[0]
        return c.kind != "enum" and supported(c, top=False)
    return False  # map, union


def _strip_and_inline(node: Any, named: dict[str, Any], ns: str | None) -> Any:
    """Schema JSON polars can read: no defaults, every named-type use expanded in place.

    polars resolves no named-type references, so each use of a named type repeats its
    definition (safe: recursive types never reach the fast path).
    """
    if isinstance(node, str):
        full = node if "." in node or ns is None else f"{ns}.{node}"
        for key in (full, node):
            if key in named:
                return _strip_and_inline(named[key], named, ns)
        return node
    if isinstance(node, list):
        return [_strip_and_inline(b, named, ns) for b in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "default" and not k.startswith("__")}
    t = node.get("type")
    if t in ("record", "error", "enum", "fixed") and "name" in node:
        name = node["name"]
        space = node.get("namespace", ns)
        full = name if "." in name or not space else f"{space}.{name}"
        named.setdefault(full, node)
        ns = full.rsplit(".", 1)[0] if "." in full else space
        out["name"] = full
        out.pop("namespace", None)
        if "fields" in node:
            out["fields"] = [
                {
                    **{k: v for k, v in f.items() if k != "default"},
                    "type": _strip_and_inline(f["type"], named, ns),
                }
                for f in node["fields"]
            ]
        return out
    if t == "array":
        out["items"] = _strip_and_inline(node["items"], named, ns)
    elif t == "map":
        out["values"] = _strip_and_inline(node["values"], named, ns)
    elif isinstance(t, dict | list) or (isinstance(t, str) and t in named):
        out["type"] = _strip_and_inline(t, named, ns)
    return out


def ocf_schema_json(schema: Any, named: Mapping[str, Any]) -> str:
    """Self-contained schema JSON for the OCF header: references inlined, no defaults."""
    return json.dumps(_strip_and_inline(schema, dict(named), None))


def _zz(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z & ~0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        else:
            out.append(z)
            return bytes(out)


def ocf_header(schema_json: str) -> bytes:
    """The OCF file header (magic, metadata map, sync marker) for ``schema_json``."""
    meta = {b"avro.schema": schema_json.encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += _zz(len(meta))
    for k, v in meta.items():
        out += _zz(len(k)) + k + _zz(len(v)) + v
    out += _zz(0) + _SYNC
    return bytes(out)


def _ocf_block(header: bytes, bodies: pa.BinaryArray) -> bytes:
    """One OCF file holding ``bodies`` as its only block, built with a single copy.

    The bodies are contiguous in the array's data buffer, so the block's payload is a
    view of it; ``bytes.join`` copies each part once.
    """
    n = len(bodies)
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + n + 1
    ]
    data = bodies.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    body = memoryview(data)[start:end] if data is not None else b""
    return b"".join((header, _zz(n), _zz(end - start), body, _SYNC))


def decode_block(header: bytes, node: AvroNode, bodies: pa.BinaryArray) -> pa.RecordBatch | None:
    """Decode ``bodies`` (one writer schema) to a batch of exact types, or ``None``.

    ``None`` means "use the exact path": polars is missing or failed, or a decoded row's
    re-computed encoded size differs from its body length.
    """
    pl = _load_polars()
    if pl is None or len(bodies) == 0:
        return None
    block = _ocf_block(header, bodies)
    try:
        table = pl.read_avro(io.BytesIO(block)).to_arrow()
        if table.num_rows != len(bodies):
            return None
        arrays = [
            cast_exact(_one_chunk(table.column(i)), child.arrow)
            for i, child in enumerate(node.children)
        ]
        batch = pa.RecordBatch.from_arrays(
            arrays,
            schema=pa.schema(
                [c.arrow_field(n) for n, c in zip(node.field_names, node.children, strict=False)]
            ),
        )
        field_sizes = [value_sizes(a, c) for a, c in zip(arrays, node.children, strict=False)]
        sizes = np.zeros(len(bodies), dtype=np.int64)
        for field_size in field_sizes:
            sizes += field_size
        if not np.array_equal(sizes, _lengths(bodies)):
            return None
        # The layout is proven; a non-canonical branch or boolean byte goes to the exact
        # path, which reports the row.
        if has_tags(node) and tag_errors(bodies, arrays, node, field_sizes).any():
            return None
        # polars reads a uuid as any string; the exact path parses it (and fails, or
        # writes it canonical), so anything but the canonical form goes there.
        if not all(uuids_canonical(a, c) for a, c in zip(arrays, node.children, strict=False)):
            return None
    except MemoryError:
        # Not a limit of polars: the exact path needs more memory (a dict per record),
        # so falling back would only hide the exhaustion.
        raise
    except (Exception, _PanicException):
        # polars' PanicException derives from BaseException; catch it by name so that
        # KeyboardInterrupt and SystemExit still propagate.
        return None
    return batch


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array; polars' single chunk as it is (``combine_chunks`` copies it)."""
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def _lengths(bodies: pa.BinaryArray) -> npt.NDArray[np.int64]:
    """Each body's byte length (0 for a null)."""
    if bodies.null_count:
        return int_values(pc.binary_length(bodies), pa.int64())
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + len(bodies) + 1
    ]
    return np.diff(offsets).astype(np.int64)


def cast_exact(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast polars' output to the exact type; nested types child by child.

    A plain struct cast refuses a non-nullable child that holds nulls under null parent
    slots, so structs and lists are rebuilt around recursively cast children.
    """
    if arr.type == target:
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(target):
        children = [cast_exact(arr.field(i), f.type) for i, f in enumerate(target)]
        if mask is not None:
            children = required_children(children, target)
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        offsets = arr.offsets.cast(pa.int32())
        values = cast_exact(arr.values, target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(target)
