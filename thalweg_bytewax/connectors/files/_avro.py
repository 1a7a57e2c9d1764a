"""Private to :mod:`thalweg_bytewax.connectors.files`: Avro Object Container Files.

The container is walked block by block here (header, then per block: record count,
byte size, data, the 16-byte sync marker; the container's fields are read by
:mod:`._avro_container`). A block's data (``null`` or ``deflate``
codec) is split into record bodies, and the bodies are decoded by
:class:`~thalweg_bytewax.codecs.AvroCodec` with ``framing="none"`` and the file's writer
schema — the same decode a Kafka record with that body gets. Each body is the row's
``_twg_source_value`` and what its record id hashes.

Failures stay local: a block whose sync marker does not match the header's is sent to
the DLQ whole (its data cannot be trusted) and reading resumes at the next block; a
body the codec rejects is one DLQ row; a block that cannot be split past some record
rejects the rest of that block as one DLQ row. Resume skips whole blocks by their
record counts without decoding them.

No length or count field is trusted: a header entry or a block larger than the bytes
left in the file is a truncated file; a block over ``max_block_bytes`` (stored or
inflated) or declaring more than ``max_block_records`` records, or more records than
its bytes can hold at the schema's narrowest record, is one DLQ row and the next block
is read. A writer schema with an array of zero-width items (``null``, a record of
``null`` fields) has its blocks split by :class:`ItemWalker` instead of fastavro, which
caps those items at ``max_block_records`` per block before any decoder loops over them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from thalweg_bytewax.codecs.avro import AvroCodec
from thalweg_bytewax.errors import ThalwegError

from ._avro_container import (
    Corrupt,
    block_data,
    min_width,
    read_header,
    read_long,
    resync_block,
    size_of,
    split_bodies,
)
from ._avro_items import ItemWalker, has_zero_width_items
from ._common import Bad, Chunk, ReadOptions, Target, cast_rows, decode_rows, whole_file_bad
from ._limits import FileLimits, LimitExceeded, over_limit

__all__ = ["read_avro"]

def read_avro(target: Target, start: int, options: ReadOptions) -> Iterator[Chunk]:
    """Avro OCF blocks, decoded by the Avro codec, in record order."""
    limits = options.limits
    with target.open() as f:
        end = size_of(f)
        try:
            meta, sync = read_header(f, end)
            writer = json.loads(meta["avro.schema"])
            codec_name = meta.get("avro.codec", b"null").decode()
            parsed = fastavro.parse_schema(writer)
            width = min_width(parsed, parsed.get("__named_schemas", {}) if isinstance(
                parsed, dict) else {})
            codec = AvroCodec(framing="none", schema=writer)
            walker = (
                ItemWalker(parsed, limits.max_block_records)
                if has_zero_width_items(parsed) else None
            )
        except (EOFError, Corrupt, KeyError, ValueError, TypeError) as exc:
            yield whole_file_bad(start, "cannot read the Avro container header", exc)
            return
        except Exception as exc:  # fastavro / the codec refusing the writer schema
            if isinstance(exc, ThalwegError) or type(exc).__module__.startswith("fastavro"):
                yield whole_file_bad(start, "cannot read the Avro container header", exc)
                return
            raise
        first = 0
        while True:
            at = f.tell()
            try:
                count = read_long(f)
                size = read_long(f)
            except EOFError:
                return
            except Corrupt as exc:
                yield whole_file_bad(max(first, start), f"Avro block at byte {at}", exc)
                return
            left = end - f.tell()
            if count < 0 or size < 0 or size + 16 > left:
                msg = (
                    f"truncated Avro block at byte {at} (from record {first}): it declares "
                    f"{count} record(s) in {size} byte(s); {left} byte(s) are left"
                )
                yield Chunk(None, np.zeros(0, np.int64), first, bad=[Bad(max(first, start), msg)])
                return
            over = _over_bounds(count, size, width, limits)
            if over is not None:
                f.seek(f.tell() + size)
                marker = f.read(16)
                if first + count > start:
                    raw = None
                    if size <= limits.max_block_bytes:
                        f.seek(f.tell() - 16 - size)
                        raw = f.read(size)
                        f.seek(f.tell() + 16)
                    msg = f"Avro block at byte {at} ({count} records from record {first}): {over}"
                    yield Chunk(None, np.zeros(0, np.int64), first + count,
                                bad=[Bad(max(first, start), msg, raw)])
                first += count
                if marker != sync and not resync_block(f, sync, at):
                    return
                continue
            raw = f.read(size)
            marker = f.read(16)
            if len(raw) != size or len(marker) != 16:
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
                if not resync_block(f, sync, at):
                    return
                continue
            yield from _block(
                codec, codec_name, parsed, raw, count, first, start, options.schema, at, limits,
                width, walker,
            )
            first += count


def _over_bounds(count: int, size: int, width: int, limits: FileLimits) -> str | None:
    """Why a block's declared count and size are not to be believed, or ``None``."""
    if size > limits.max_block_bytes:
        what = f"a block of {size:,} stored bytes"
        return over_limit("max_block_bytes", limits.max_block_bytes, what)
    if count > limits.max_block_records:
        what = f"a block declaring {count:,} records"
        return over_limit("max_block_records", limits.max_block_records, what)
    if width and count * width > limits.max_block_bytes:
        what = f"{count:,} records of {width} byte(s) at least"
        return over_limit("max_block_bytes", limits.max_block_bytes, what)
    return None


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
    limits: FileLimits,
    width: int,
    walker: ItemWalker | None,
) -> Iterator[Chunk]:
    bad: list[Bad] = []
    try:
        data = block_data(codec_name, raw, limits.max_block_bytes)
        if count * width > len(data):
            msg = f"{count} records of {width} byte(s) at least in {len(data)} byte(s)"
            raise Corrupt(msg)
    except (zlib.error, Corrupt, LimitExceeded) as exc:
        msg = f"Avro block at byte {at} ({count} records from record {first}): {exc}"
        yield Chunk(None, np.zeros(0, np.int64), first + count, bad=[Bad(first, msg, raw)])
        return
    bodies, stopped = walker.split(data, count) if walker else split_bodies(data, count, parsed)
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
    values: pa.Array | None
    rows, offsets, values, failed = decode_rows(codec, arr, offsets)
    bad += failed
    if rows is not None and schema is not None:
        rows, kept, more = cast_rows(rows, schema, 0, offsets)
        if len(kept) != len(offsets):
            values = values.filter(pa.array(np.isin(offsets, kept))) if values else None
        offsets = kept
        bad += more
    bad.sort(key=lambda b: b.row)
    yield Chunk(rows, offsets, first + count, values if rows is not None else None, bad)
