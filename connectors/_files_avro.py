"""Private to :mod:`thalweg_bytewax.connectors.files`: Avro Object Container Files.

The container is walked block by block here (header, then per block: record count,
byte size, data, the 16-byte sync marker). A block's data (``null`` or ``deflate``
codec) is split into record bodies, and the bodies are decoded by
:class:`~thalweg_bytewax.codecs.AvroCodec` with ``framing="none"`` and the file's writer
schema — the same decode a Kafka record with that body gets. Each body is the row's
``_twg_source_value`` and what its record id hashes.

Failures stay local: a block whose sync marker does not match the header's is sent to
the DLQ whole (its data cannot be trusted) and reading resumes at the next block; a
body the codec rejects is one DLQ row; a block that cannot be split past some record
rejects the rest of that block as one DLQ row. Resume skips whole blocks by their
record counts without decoding them.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from typing import IO, Any

import fastavro
import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs.avro import AvroCodec

from ._files_common import Bad, Chunk, Target, cast_rows, whole_file_bad

__all__ = ["read_avro"]

_MAGIC = b"Obj\x01"


class _Corrupt(Exception):
    """The container's structure is broken at this point."""


def _long(f: IO[bytes]) -> int:
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
            raise _Corrupt(msg)


def _header(f: IO[bytes]) -> tuple[dict[str, bytes], bytes]:
    if f.read(4) != _MAGIC:
        msg = "not an Avro container (bad magic bytes)"
        raise _Corrupt(msg)
    meta: dict[str, bytes] = {}
    while (count := _long(f)) != 0:
        if count < 0:
            count = -count
            _long(f)  # the block's byte size
        for _ in range(count):
            key = f.read(_long(f)).decode()
            meta[key] = f.read(_long(f))
    sync = f.read(16)
    if len(sync) != 16:
        raise EOFError
    return meta, sync


def _data(codec: str, raw: bytes) -> bytes:
    if codec == "null":
        return raw
    if codec == "deflate":
        return zlib.decompress(raw, -15)
    msg = f"block codec {codec!r} is not supported (expected 'null' or 'deflate')"
    raise _Corrupt(msg)


def _split(data: bytes, count: int, parsed: Any) -> tuple[list[bytes], str | None]:
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


def _resync(f: IO[bytes], sync: bytes) -> bool:
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


def read_avro(
    target: Target, start: int, schema: pa.Schema | None, batch_rows: int
) -> Iterator[Chunk]:
    """Avro OCF blocks, decoded by the Avro codec, in record order."""
    with target.open() as f:
        try:
            meta, sync = _header(f)
            writer = json.loads(meta["avro.schema"])
            codec_name = meta.get("avro.codec", b"null").decode()
            parsed = fastavro.parse_schema(writer)
            codec = AvroCodec(framing="none", schema=writer)
        except (EOFError, _Corrupt, KeyError, ValueError) as exc:
            yield whole_file_bad(start, "cannot read the Avro container header", exc)
            return
        first = 0
        while True:
            at = f.tell()
            try:
                count = _long(f)
                size = _long(f)
            except EOFError:
                return
            except _Corrupt as exc:
                yield whole_file_bad(max(first, start), f"Avro block at byte {at}", exc)
                return
            raw = f.read(size) if 0 <= size else b""
            marker = f.read(16)
            if count < 0 or size < 0 or len(raw) != size or len(marker) != 16:
                msg = f"truncated Avro block at byte {at} (from record {first})"
                yield Chunk(None, np.zeros(0, np.int64), first, bad=[Bad(max(first, start), msg)])
                return
            if first + count <= start:
                first += count
                continue
            if marker != sync:
                msg = (
                    f"Avro block at byte {at} ({count} records from record {first}): sync "
                    "marker does not match the header's; the block is not trusted"
                )
                bad = [Bad(max(first, start), msg, raw)]
                first += count
                yield Chunk(None, np.zeros(0, np.int64), max(first, start), bad=bad)
                if not _resync_block(f, sync, at):
                    return
                continue
            yield from _block(codec, codec_name, parsed, raw, count, first, start, schema, at)
            first += count


def _resync_block(f: IO[bytes], sync: bytes, at: int) -> bool:
    """After a bad marker: continue at the block following the bad one, if found."""
    f.seek(at)
    _long(f)
    size = _long(f)
    f.seek(f.tell() + size + 16)  # past the damaged marker: the next block, if intact
    here = f.tell()
    try:
        _long(f)
        nsize = _long(f)
        f.seek(f.tell() + nsize)
        if f.read(16) == sync:
            f.seek(here)
            return True
    except (EOFError, _Corrupt):
        pass
    f.seek(here)
    return _resync(f, sync)


def _block(
    codec: AvroCodec,
    codec_name: str,
    parsed: Any,
    raw: bytes,
    count: int,
    first: int,
    start: int,
    schema: pa.Schema | None,
    at: int,
) -> Iterator[Chunk]:
    bad: list[Bad] = []
    try:
        data = _data(codec_name, raw)
    except (zlib.error, _Corrupt) as exc:
        msg = f"Avro block at byte {at} ({count} records from record {first}): {exc}"
        yield Chunk(None, np.zeros(0, np.int64), first + count, bad=[Bad(first, msg, raw)])
        return
    bodies, stopped = _split(data, count, parsed)
    if stopped is not None:
        lost = first + len(bodies)
        rest = data[sum(len(b) for b in bodies) :]
        msg = (
            f"Avro block at byte {at}: records {lost}..{first + count - 1} unreadable "
            f"({stopped})"
        )
        if lost >= start:
            bad.append(Bad(lost, msg, rest))
    arr = pa.array(bodies, pa.binary())
    offsets = np.arange(first, first + len(bodies), dtype=np.int64)
    keep = offsets >= start
    if not keep.all():
        arr = arr.filter(pa.array(keep))
        offsets = offsets[keep]
    if len(arr) == 0:
        yield Chunk(None, offsets, first + count, bad=bad)
        return
    result = codec.decode_batch(arr)
    bad += [
        Bad(int(offsets[e.index]), f"{e.kind}: {e.message}", arr[e.index].as_py())
        for e in result.errors
    ]
    values: pa.Array | None = arr
    if result.errors:
        mask = np.ones(len(arr), dtype=bool)
        mask[[e.index for e in result.errors]] = False
        offsets = offsets[mask]
        values = arr.filter(pa.array(mask))
    rows: pa.RecordBatch | None = result.batch if result.batch.num_rows else None
    if rows is not None and schema is not None:
        rows, kept, more = cast_rows(rows, schema, 0, offsets)
        if len(kept) != len(offsets):
            values = values.filter(pa.array(np.isin(offsets, kept))) if values else None
        offsets = kept
        bad += more
    bad.sort(key=lambda b: b.row)
    yield Chunk(rows, offsets, first + count, values if rows is not None else None, bad)
