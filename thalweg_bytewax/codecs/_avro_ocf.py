"""The Avro Object Container File around a batch's bodies, as polars reads it.

The fast path (:mod:`._avro_fast`) hands polars one in-memory OCF file a writer schema:
a header whose schema JSON polars can read (no defaults, named types inlined), then the
batch's bodies as the file's only block, built with one copy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["SYNC", "ocf_block", "ocf_header", "ocf_schema_json"]

SYNC = os.urandom(16)
"""The sync marker of every OCF file this process builds (one file, one block)."""


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
    out += _zz(0) + SYNC
    return bytes(out)


def ocf_block(header: bytes, bodies: pa.BinaryArray) -> bytes:
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
    return b"".join((header, _zz(n), _zz(end - start), body, SYNC))
