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
  truncated body would shift every record after it. Before polars runs, one native pass
  (:mod:`~thalweg_bytewax.codecs._avro_walk`) walks every body against the writer schema
  and proves it holds exactly one record in its canonical encoding (minimal varints,
  one block per array, boolean bytes 0/1, union branches and enum indexes in range,
  canonical uuids); any row that is not sends the group to the exact path. With every
  boundary proven, each row is decoded from exactly its own bytes. Where the extension
  is not built, the same is proven after decoding from polars' columns: each row's
  encoded size recomputed (vectorised) must equal its body length, and each union
  branch, boolean byte, array count, enum index, ten-byte long (its last byte 1: no
  bit past 64) and uuid must be canonical; with a bytes-backed decimal in the schema
  (whose empty encoding polars reads as 0, a byte short of its size), every varint,
  decimal length and array end is checked where it is, field after field.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs import _avro_walk
from thalweg_bytewax.codecs._avro_canonical import (
    has_tags,
    noncanonical_tags,
    tag_errors,
    uuids_canonical,
)
from thalweg_bytewax.codecs._avro_ocf import SYNC, ocf_block, ocf_header, ocf_schema_json
from thalweg_bytewax.codecs._avro_sizes import int_values, value_sizes
from thalweg_bytewax.codecs._avro_types import AvroNode
from thalweg_bytewax.codecs._nulls import rebuilt_struct

__all__ = [
    "available",
    "cast_exact",
    "decode_block",
    "decode_framed",
    "empty_items",
    "needs_walk",
    "has_tags",
    "noncanonical_tags",
    "ocf_header",
    "ocf_schema_json",
    "supported",
    "tag_errors",
]

logger = logging.getLogger(__name__)

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


def decode_block(header: bytes, node: AvroNode, bodies: pa.BinaryArray) -> pa.RecordBatch | None:
    """Decode ``bodies`` (one writer schema) to a batch of exact types, or ``None``.

    ``None`` means "use the exact path": polars is missing or failed, or a decoded row's
    re-computed encoded size differs from its body length.
    """
    pl = _load_polars()
    if pl is None or len(bodies) == 0:
        return None
    walked = _walk(node, bodies)
    if walked is not None and walked.bad:
        return None  # some body is not one canonical record: polars is not asked
    if walked is None and needs_walk(node):
        # polars would read some values wrong unseen, or loop on a block of items that
        # take no byte: the exact path reads such a schema, every body walked first
        return None
    unwalked = bodies if walked is None else None
    return _read_block(ocf_block(header, bodies), node, len(bodies), unwalked)


def decode_framed(
    header: bytes, node: AvroNode, payloads: pa.BinaryArray, schema_id: int
) -> pa.RecordBatch | None:
    """:func:`decode_block` of Confluent-framed ``payloads`` all of writer ``schema_id``.

    The frame check, the walk and the container block are one native pass
    (:func:`._avro_walk.framed_block`): no columnar peel, no sliced copy of the bodies.
    ``None`` means "peel and decode group by group": polars is missing or failed, or a
    payload is not framed for ``schema_id`` or not proven by the walk.
    """
    pl = _load_polars()
    if pl is None or len(payloads) == 0:
        return None
    block = _avro_walk.framed_block(node, payloads, schema_id, header, SYNC)
    if block is None:
        return None
    return _read_block(block, node, len(payloads))


def _read_block(
    block: bytes, node: AvroNode, rows: int, unwalked: pa.BinaryArray | None = None
) -> pa.RecordBatch | None:
    """The records of one container block (``rows`` of them) read by polars, exact types.

    ``unwalked``: the bodies when no walk proved them; their rows are then checked from
    the decoded columns. ``None`` when polars failed or a check did.
    """
    pl = _load_polars()
    try:
        table = pl.read_avro(io.BytesIO(block)).to_arrow()
        if table.num_rows != rows:
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
        if unwalked is not None and not _columns_exact(unwalked, arrays, node):
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


def _walk(node: AvroNode, bodies: pa.BinaryArray) -> _avro_walk.Walked | None:
    """The native walk of ``bodies`` (:mod:`._avro_walk`), or ``None`` where it is not built."""
    global _said_columns  # noqa: PLW0603 - one log line per process
    if not _avro_walk.NATIVE:
        if not _said_columns:
            _said_columns = True
            logger.warning(
                "avro: the native exactness walk is not built (no C compiler at install); "
                "the polars fast path checks each row from its decoded columns instead "
                "(the same rows accepted, more CPU per record), and schemas with ints, "
                "decimals, dates, times or timestamps take the exact path (fastavro, "
                "several times slower). Reinstall thalweg-bytewax with a C compiler to "
                "build it."
            )
        return None
    return _avro_walk.walk_node(node, bodies)


_said_columns = False


def needs_walk(node: AvroNode) -> bool:
    """Whether polars may read ``node`` wrong (or for ever) unless the native walk runs first."""
    return _values_unchecked(node) or empty_items(node)


def _values_unchecked(node: AvroNode) -> bool:
    """Whether ``node`` holds a value polars reads wrong without an error.

    An ``int`` beyond 32 bits (wrapped), a date, time or timestamp outside the range it
    converts in (null), a decimal beyond its precision (kept): the native walk refuses
    such bodies before polars runs, and polars' columns cannot tell them from good
    values (a wrapped int takes as many bytes). Without the walk such a schema takes
    the exact path, which checks every body first.
    """
    t = node.arrow
    if node.kind in ("prim", "decimal") and (
        pa.types.is_int32(t)
        or pa.types.is_date32(t)
        or pa.types.is_time32(t)
        or pa.types.is_time64(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    ):
        return True
    return any(_values_unchecked(c) for c in node.children)


def empty_items(node: AvroNode) -> bool:
    """Whether ``node`` holds an array of items that may take no byte (records of nulls).

    Such a block's count is bounded by no byte of the body: only the walk bounds it.
    """
    if node.kind == "array" and _may_be_empty(node.children[0]):
        return True
    return any(empty_items(c) for c in node.children)


def _may_be_empty(node: AvroNode) -> bool:
    if node.kind == "record":
        return all(_may_be_empty(c) for c in node.children)
    if node.kind == "fixed":
        return node.size == 0
    return node.kind == "prim" and pa.types.is_null(node.arrow)


def _columns_exact(bodies: pa.BinaryArray, arrays: list[pa.Array], node: AvroNode) -> bool:
    """The check without the native walk: from polars' columns, whether each row is exact.

    Each row's encoded size is recomputed from its decoded values and must equal its
    body's length; then every byte that can take its value's size yet say another
    value (union branches, booleans, array counts, enum indexes, a ten-byte long's
    last byte; with a bytes decimal, every varint and decimal length), whose positions
    follow from the sizes, must be the one its value encodes to
    (:func:`._avro_canonical.tag_errors`), and every uuid canonical.
    """
    field_sizes = [value_sizes(a, c) for a, c in zip(arrays, node.children, strict=False)]
    sizes = np.zeros(len(bodies), dtype=np.int64)
    for field_size in field_sizes:
        sizes += field_size
    if not np.array_equal(sizes, _lengths(bodies)):
        return False
    # The row sizes are proven; a non-canonical byte goes to the exact path, which
    # reports the row. A value placed past its block's end (sizes that add up to the
    # body's length but fall apart inside it) is no proven layout either.
    try:
        if tag_errors(bodies, arrays, node, field_sizes, varints=True).any():
            return False
    except IndexError:
        return False
    # polars reads a uuid as any string; the exact path parses it (and fails, or
    # writes it canonical), so anything but the canonical form goes there.
    return all(uuids_canonical(a, c) for a, c in zip(arrays, node.children, strict=False))


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
        return rebuilt_struct(arr, target, cast_exact, mask)
    if pa.types.is_list(target):
        offsets = arr.offsets.cast(pa.int32())
        values = cast_exact(arr.values, target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(target)
