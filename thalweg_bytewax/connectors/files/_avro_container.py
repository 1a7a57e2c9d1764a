"""Private to :mod:`thalweg_bytewax.connectors.files`: the fields of an Avro Object Container File.

The header (magic bytes, metadata map, sync marker), a block's varint counts, its data
inflated within a bound, its record bodies, and the way back to the next block after a
damaged one. Every length is checked against the bytes left in the file before it is
read. :func:`min_width` is the fewest bytes a record of a schema can take, which bounds
the records a block of a given size can hold. :mod:`._avro` reads a file with these.
"""

from __future__ import annotations

import io
import zlib
from typing import IO, Any

import fastavro

from ._limits import LimitExceeded, over_limit

__all__ = [
    "MAGIC",
    "Corrupt",
    "block_data",
    "min_width",
    "read_header",
    "read_long",
    "read_sized",
    "resync",
    "resync_block",
    "size_of",
    "split_bodies",
]

MAGIC = b"Obj\x01"


class Corrupt(Exception):
    """The container's structure is broken at this point."""


def read_long(f: IO[bytes]) -> int:
    """An Avro ``long`` (zig-zag varint); ``EOFError`` at the end of the file."""
    shift = 0
    acc = 0
    while True:
        b = f.read(1)
        if not b:
            raise EOFError
        acc |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return (acc >> 1) ^ -(acc & 1)
        shift += 7
        if shift > 63:
            msg = "varint longer than 10 bytes"
            raise Corrupt(msg)


def read_sized(f: IO[bytes], end: int) -> bytes:
    """A length-prefixed value, its length checked against the bytes left first."""
    n = read_long(f)
    if n < 0 or n > end - f.tell():
        msg = f"a header value of {n} bytes with {end - f.tell()} left in the file"
        raise Corrupt(msg)
    return f.read(n)


def read_header(f: IO[bytes], end: int) -> tuple[dict[str, bytes], bytes]:
    """The header's metadata map and sync marker (``f`` at the file's start)."""
    if f.read(4) != MAGIC:
        msg = "not an Avro container (bad magic bytes)"
        raise Corrupt(msg)
    meta: dict[str, bytes] = {}
    while (count := read_long(f)) != 0:
        if count < 0:
            count = -count
            read_long(f)  # the block's byte size
        if count > (end - f.tell()) // 2:  # an entry is two lengths at least
            msg = f"a header map of {count} entries with {end - f.tell()} bytes left"
            raise Corrupt(msg)
        for _ in range(count):
            key = read_sized(f, end).decode()
            meta[key] = read_sized(f, end)
    sync = f.read(16)
    if len(sync) != 16:
        raise EOFError
    return meta, sync


def block_data(codec: str, raw: bytes, cap: int) -> bytes:
    """A block's data as stored by ``codec``, inflated to at most ``cap`` bytes."""
    if codec == "null":
        return raw
    if codec == "deflate":
        inflate = zlib.decompressobj(-15)
        data = inflate.decompress(raw, cap + 1)  # never more than the bound, plus one
        if len(data) > cap:
            what = f"a deflate block inflating past {cap:,} bytes"
            raise LimitExceeded(over_limit("max_block_bytes", cap, what))
        if not inflate.eof:
            msg = "deflate data is truncated"
            raise Corrupt(msg)
        return data
    msg = f"block codec {codec!r} is not supported (expected 'null' or 'deflate')"
    raise Corrupt(msg)


def split_bodies(data: bytes, count: int, parsed: Any) -> tuple[list[bytes], str | None]:
    """The record bodies of one block, and why splitting stopped early (if it did)."""
    buf = io.BytesIO(data)
    bodies: list[bytes] = []
    pos = 0
    for _ in range(count):
        try:
            fastavro.schemaless_reader(buf, parsed, None)
        except Exception as exc:  # noqa: BLE001 - any reader failure: the rest is unreadable
            return bodies, f"{type(exc).__name__}: {exc}"
        end = buf.tell()
        bodies.append(data[pos:end])
        pos = end
    if pos != len(data):
        return bodies, f"{len(data) - pos} byte(s) left after {count} records"
    return bodies, None


def resync(f: IO[bytes], sync: bytes) -> bool:
    """Move ``f`` just past the next sync marker; False at the end of the file."""
    tail = b""
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return False
        data = tail + chunk
        at = data.find(sync)
        if at >= 0:
            f.seek(f.tell() - len(data) + at + 16)
            return True
        tail = data[-15:]


def min_width(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> int:
    """The fewest bytes a value of a parsed Avro schema can take (0: ``null``)."""
    if isinstance(schema, str):
        if schema in _WIDTHS:
            return _WIDTHS[schema]
        if schema in seen or schema not in named:
            return 0  # a recursive reference: a lower bound is enough
        return min_width(named[schema], named, seen | {schema})
    if isinstance(schema, list):
        return 1  # the branch index
    kind = schema.get("type")
    if kind == "record":
        name = schema.get("name", "")
        return sum(min_width(f["type"], named, seen | {name}) for f in schema["fields"])
    if kind == "fixed":
        return int(schema.get("size", 0))
    if kind in ("array", "map", "enum"):
        return 1
    return min_width(kind, named, seen)


_WIDTHS = {
    "null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
    "bytes": 1, "string": 1,
}


def size_of(f: IO[bytes]) -> int:
    """The size of the file ``f`` reads, its position kept."""
    here = f.tell()
    end = f.seek(0, io.SEEK_END)
    f.seek(here)
    return end


def resync_block(f: IO[bytes], sync: bytes, at: int) -> bool:
    """After a bad marker: continue at the block following the bad one, if found."""
    f.seek(at)
    read_long(f)
    size = read_long(f)  # checked against the bytes left when the block was read
    f.seek(f.tell() + size + 16)  # past the damaged marker: the next block, if intact
    here = f.tell()
    try:
        read_long(f)
        nsize = read_long(f)
        if nsize >= 0:
            f.seek(f.tell() + nsize)
            if f.read(16) == sync:
                f.seek(here)
                return True
    except (EOFError, Corrupt):
        pass
    f.seek(here)
    return resync(f, sync)
