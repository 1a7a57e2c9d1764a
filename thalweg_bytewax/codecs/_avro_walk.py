"""The fast path's exactness check in one native pass: each body walked as one record.

Private to :mod:`thalweg_bytewax.codecs._avro_fast`. polars reads a block's bodies as one
byte stream, so a body cut short or holding extra bytes would shift every later row
silently. The C extension ``_avro_native`` walks every body of a batch against the
writer schema, compiled here once into a *program* (int32 words in pre-order), and
proves that it holds exactly one record in its one canonical encoding; every row that
does not is reported with the reason of its first failure and that read's byte offset.

It accepts exactly the rows the column-wise check over polars' output accepts
(:mod:`~thalweg_bytewax.codecs._avro_sizes`, :mod:`~thalweg_bytewax.codecs._avro_canonical`),
which stays the check where the extension is not built.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs import _avro_walk_ops as ops
from thalweg_bytewax.codecs._avro_scan import _DATE_DAYS, _DAY_MS, _TS_MS
from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs._avro_walk_py import Walked, walk_py

try:
    from thalweg_bytewax.codecs import _avro_native
except ImportError:  # built without a C compiler: _avro_fast checks polars' columns
    _avro_native = None  # type: ignore[assignment]

__all__ = [
    "INT_RANGE",
    "MAX_DEPTH",
    "NATIVE",
    "PRECISION",
    "RANGE",
    "REASONS",
    "Walked",
    "labels",
    "program",
    "walk",
    "walk_any",
    "walk_node",
]

logger = logging.getLogger(__name__)

NATIVE = _avro_native is not None
"""Whether the native walk was built with the package."""

MAX_DEPTH = 64
"""The deepest nesting of types the walk takes (the C side's ``MAX_DEPTH``); a deeper
schema is checked from polars' columns."""

_PRIM_OPS = {
    "null": ops.NULL,
    "boolean": ops.BOOL,
    "int": ops.INT,
    "long": ops.LONG,
    "float": ops.FLOAT,
    "double": ops.DOUBLE,
    "bytes": ops.BYTES,
    "string": ops.STRING,
}

REASONS: dict[int, str] = {
    1: "truncated: a read runs past the end of the body",
    2: "the body ends inside a varint",
    3: "bytes left over after the record",
    4: "a varint longer than 64 bits",
    5: "a varint longer than its value needs",
    6: "an int outside 32 bits",
    7: "a boolean byte other than 0 or 1",
    8: "a union branch index outside the union",
    9: "an enum index outside the symbols",
    10: "a negative bytes or string length",
    11: "a negative block count or a second block",
    12: "a block's byte size differs from what its items take",
    13: "a block count more than the bytes left can hold",
    14: "a uuid that is not canonical lower-case text",
    15: "decimal bytes that are empty, too long or not minimal",
    16: "a date, time or timestamp outside the range every reader converts",
    17: "a decimal with more digits than its precision",
}
"""Each failure status of :func:`walk` (0 is a row proven), as text."""


INT_RANGE = 6
"""The status of a body whose first failure is an ``int`` outside 32 bits."""
RANGE = 16
"""The status of a body whose first failure is a date, time or timestamp out of range."""
PRECISION = 17
"""The status of a body whose first failure is a decimal beyond its precision."""


def _is_null(branch: object) -> bool:
    return branch == "null" or (isinstance(branch, dict) and branch.get("type") == "null")


def _decimal_bytes(node: AvroNode) -> int:
    """The most bytes a decimal's minimal two's complement may take here.

    Those of its precision's largest value, and never fewer than 8: the column-wise
    check accepts any value of up to 8 bytes (an int64) whatever the precision, and
    the walk accepts no more and no less than it.
    """
    precision: int = node.arrow.precision
    largest: int = 10**precision - 1
    return max(8, (largest.bit_length() + 8) // 8)


def _emit(  # noqa: PLR0912 - one case per kind
    node: AvroNode, out: list[int], labels: dict[int, str], path: str = "", depth: int = 0
) -> None:
    if depth > MAX_DEPTH:
        msg = f"the avro type nests deeper than {MAX_DEPTH} levels"
        raise TypeError(msg)
    depth += 1
    kind = node.kind
    if kind == "record":
        out += [ops.RECORD, len(node.children)]
        for name, child in zip(node.field_names, node.children, strict=False):
            _emit(child, out, labels, f"{path}.{name}" if path else name, depth)
    elif kind == "nullable":
        branches = node.avro if isinstance(node.avro, list) else ["null", None]
        out += [ops.UNION, 2]
        for branch in branches:
            if _is_null(branch):
                out.append(ops.NULL)
            else:
                _emit(node.children[0], out, labels, path, depth)
    elif kind == "union" and node.children:
        out += [ops.UNION, len(node.children)]
        for child in node.children:
            _emit(child, out, labels, path, depth)
    elif kind in ("array", "map"):
        out.append(ops.ARRAY if kind == "array" else ops.MAP)
        _emit(node.children[0], out, labels, f"{path}[]", depth)
    elif kind == "enum" and node.symbols:
        out += [ops.ENUM, len(node.symbols)]
    elif kind == "decimal":
        precision: int = node.arrow.precision
        labels[len(out)] = f"`{path}` (decimal({precision}, {node.arrow.scale}))"
        if node.size:
            out += [ops.FDECIMAL, node.size, precision]
        else:
            out += [ops.DECIMAL, _decimal_bytes(node), precision]
    elif kind == "fixed":
        out += [ops.FIXED, node.size]
    elif kind == "uuid":
        out.append(ops.UUID)
    elif kind == "prim" and _logical_range(node.arrow) is not None:
        lo, hi = _logical_range(node.arrow)  # type: ignore[misc]
        labels[len(out)] = f"`{path}` ({node.arrow}, from {lo} to {hi})"
        out += [ops.RANGED, lo >> 32, _low(lo), hi >> 32, _low(hi)]
    elif kind == "prim" and node.name in _PRIM_OPS:
        out.append(_PRIM_OPS[node.name])
    else:
        msg = f"no walk for the avro type {node.avro!r}"
        raise TypeError(msg)


def _low(value: int) -> int:
    """The low 32 bits of ``value`` as a signed int32 word."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


def _logical_range(t: pa.DataType) -> tuple[int, int] | None:
    """The values of a date, time or timestamp every reader converts (polars, fastavro).

    Outside them polars reads a null or a value fastavro refuses, so such a row is left
    to the exact path, which reports it as fastavro reads it.
    """
    if pa.types.is_timestamp(t):
        scale = 1 if t.unit == "ms" else 1000
        return _TS_MS[0] * scale, _TS_MS[1] * scale
    if pa.types.is_date32(t):
        return _DATE_DAYS
    if pa.types.is_time32(t):
        return 0, _DAY_MS - 1
    if pa.types.is_time64(t):
        return 0, _DAY_MS * 1000 - 1
    return None


def program(node: AvroNode) -> bytes | None:
    """``node`` compiled for :func:`walk` (int32 words, native byte order).

    ``None`` when the tree holds a type the walk does not cover (an enum without
    symbols, a union without branches: types no writer can have written) or nests
    deeper than :data:`MAX_DEPTH`.
    """
    compiled = _compile(node)
    return None if compiled is None else np.asarray(compiled[0], dtype=np.int32).tobytes()


def labels(node: AvroNode) -> dict[int, str]:
    """Per program word of a date, time, timestamp or decimal: its field path and type."""
    compiled = _compile(node)
    return {} if compiled is None else compiled[1]


def _compile(node: AvroNode) -> tuple[list[int], dict[int, str]] | None:
    out: list[int] = []
    names: dict[int, str] = {}
    try:
        _emit(node, out, names)
    except TypeError:
        return None
    if max(out) > _INT32_MAX:  # a fixed size beyond any body: no program
        return None
    return out, names


_INT32_MAX = 2**31 - 1


def walk(code: bytes, bodies: pa.BinaryArray, *, canonical: bool = True) -> Walked | None:
    """Walk every body of ``bodies`` (no nulls) as one record of the program ``code``.

    Returns:
        The status of every row, or ``None`` when the extension is not built, a body is
        null or the array is not ``binary`` (int32 offsets): the caller then checks
        another way.
    """
    if not NATIVE or _avro_native is None:
        return None
    if bodies.null_count or not pa.types.is_binary(bodies.type):
        return None
    n = len(bodies)
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32)[
        bodies.offset : bodies.offset + n + 1
    ]
    data = bodies.buffers()[2]
    status, where, bad, first, op = _avro_native.walk(
        code, data if data is not None else b"", offsets, canonical=canonical
    )
    return Walked(
        np.frombuffer(status, dtype=np.uint8),
        np.frombuffer(where, dtype=np.int32),
        bad,
        first,
        np.frombuffer(op, dtype=np.int32),
    )


def framed_block(
    node: AvroNode, payloads: pa.BinaryArray, schema_id: int, head: bytes, tail: bytes
) -> bytes | None:
    """Confluent-framed ``payloads`` peeled, walked and joined into one container block.

    One native pass (``_avro_native.framed_block``): every payload must carry the frame
    of ``schema_id`` and a body that :func:`walk` proves (canonical); the block is
    ``head``, the row count, the bodies' size, the bodies and ``tail``.

    Returns:
        The block, or ``None`` when a payload is not framed so or its body is not
        proven (the caller peels and walks row by row to say which and why), a payload
        is null, the extension is not built or ``node`` has no program.
    """
    if not NATIVE or _avro_native is None:
        return None
    if payloads.null_count or not pa.types.is_binary(payloads.type) or not 0 <= schema_id < 2**32:
        return None
    code = _program_of(node)[1]
    if code is None:
        return None
    n = len(payloads)
    offsets = np.frombuffer(payloads.buffers()[1], dtype=np.int32)[
        payloads.offset : payloads.offset + n + 1
    ]
    data = payloads.buffers()[2]
    block: bytes | None = _avro_native.framed_block(
        code, data if data is not None else b"", offsets, schema_id, head, tail
    )
    return block


def walk_node(node: AvroNode, bodies: pa.BinaryArray, *, canonical: bool = True) -> Walked | None:
    """:func:`walk` with the program of ``node``, compiled once per node.

    Returns:
        As :func:`walk`; also ``None`` when ``node`` has no program.
    """
    if not NATIVE:
        return None
    code = _program_of(node)
    if code[1] is None:
        return None
    return walk(code[1], bodies, canonical=canonical)


def walk_any(node: AvroNode, bodies: pa.BinaryArray) -> Walked | None:
    """Every body of ``bodies`` walked in any layout the specification allows.

    The native walk where it is built and can read ``bodies``; else the same walk in
    Python (:mod:`._avro_walk_py`, the same statuses, offsets and bounds, a body at a
    time), so that no path hands a body to an unbounded reader unchecked.

    Returns:
        As :func:`walk`; ``None`` only when ``node`` has no program.
    """
    compiled = _program_of(node)
    if compiled[1] is None:
        return None
    walked = walk(compiled[1], bodies, canonical=False) if NATIVE else None
    if walked is not None:
        return walked
    return walk_py(compiled[1], bodies)


def _program_of(node: AvroNode) -> tuple[AvroNode, bytes | None]:
    code = _PROGRAMS.get(id(node))
    if code is None or code[0] is not node:
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            _PROGRAMS.clear()
        code = (node, program(node))
        _PROGRAMS[id(node)] = code
    return code


_PROGRAMS: dict[int, tuple[AvroNode, bytes | None]] = {}
"""Each writer schema's program, by its node (held, so the id stays its own)."""
_MAX_PROGRAMS = 1024  # writer schemas in one process; past it the cache starts over
