"""One RawBatch of several reads of one Kafka partition, in order.

A Kafka source partition gathers small polls into one batch (its ``_gather``): the
native consume's columns are joined before one RawBatch is built of them
(:func:`concat_native`), and RawBatches built by confluent-kafka's path are joined
sharing their constant columns (:func:`concat_raw_batches`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax.records._assembly import constant

__all__ = ["NativeColumns", "concat_native", "concat_raw_batches"]

NativeColumns = tuple[Any, ...]
"""The columns of one native consume: ``_kafka_native.Consumer.consume``'s result."""

_INT32_MAX = (1 << 31) - 1


def concat_native(pieces: Sequence[NativeColumns]) -> NativeColumns:
    """The columns of several native consumes of one partition as those of one, in order.

    What :func:`raw_batch_from_native` builds from the result equals the concatenation
    of what it builds from each piece (the ingest time aside), at the cost of one
    RawBatch instead of one a piece: a partition gathering small polls into one batch
    pays the batch's fixed costs (record ids, metadata columns) once.

    Args:
        pieces: Results of ``Consumer.consume`` of one partition, oldest first; at least one.

    Raises:
        ValueError: When ``pieces`` is empty.
    """
    if not pieces:
        msg = "concat_native: expected at least one consume's columns; got none"
        raise ValueError(msg)
    if len(pieces) == 1:
        return pieces[0]
    rows = [p[0] for p in pieces]
    headers = [p[18] for p in pieces]

    def joined(i: int) -> bytes:
        return b"".join(p[i] for p in pieces)

    return (
        sum(rows),
        joined(1),
        joined(2),
        joined(3),
        joined(4),
        _joined_bitmap([p[5] for p in pieces], rows),
        _joined_bitmap([p[6] for p in pieces], rows),
        _joined_offsets([p[7] for p in pieces], rows),
        joined(8),
        _joined_bitmap([p[9] for p in pieces], rows),
        _joined_offsets([p[10] for p in pieces], rows),
        joined(11),
        _joined_offsets([p[12] for p in pieces], rows),
        _joined_offsets([p[13] for p in pieces], headers),
        joined(14),
        _joined_bitmap([p[15] for p in pieces], headers),
        _joined_offsets([p[16] for p in pieces], headers),
        joined(17),
        sum(headers),
        [e for p in pieces for e in p[19]],
    )


def _joined_offsets(parts: list[bytes], counts: list[int]) -> bytes:
    """int32 offsets of ``counts[i] + 1`` entries each, as one run rebased on the last."""
    out = [np.zeros(1, np.int32)]
    base = 0
    for part, count in zip(parts, counts, strict=True):
        offsets = np.frombuffer(part, np.int32, count=count + 1)
        out.append(offsets[1:] + np.int32(base))
        base += int(offsets[-1])
    if base > _INT32_MAX:
        msg = f"concat_native: {base} bytes exceed a binary column's 2 GiB; gather less"
        raise ValueError(msg)
    return np.concatenate(out).tobytes()


def _joined_bitmap(parts: list[bytes | None], counts: list[int]) -> bytes | None:
    """Validity bitmaps of ``counts[i]`` bits each as one (``None``: every bit set)."""
    if all(part is None for part in parts):
        return None
    bits = [
        np.ones(count, np.uint8)
        if part is None
        else np.unpackbits(np.frombuffer(part, np.uint8), count=count, bitorder="little")
        for part, count in zip(parts, counts, strict=True)
    ]
    return np.packbits(np.concatenate(bits), bitorder="little").tobytes()


def concat_raw_batches(batches: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    """One RawBatch of ``batches`` (one schema, one topic-partition), rows in order.

    A column that holds one value in every batch (cluster, topic, partition, timestamp
    type, the columns a Kafka record has none of) is cut again from the column shared
    between batches (``constant``) instead of copied, as each batch's own was: copied,
    those columns cost ~80 bytes a record of memory they do not take in a batch as built.
    Every other column is copied once.

    Args:
        batches: RawBatches of one schema, oldest first; at least one.

    Raises:
        ValueError: When ``batches`` is empty.
    """
    if not batches:
        msg = "concat_raw_batches: expected at least one batch; got none"
        raise ValueError(msg)
    if len(batches) == 1:
        return batches[0]
    n = sum(b.num_rows for b in batches)
    schema = batches[0].schema
    arrays = [
        _concat_column([b.column(i) for b in batches], field.type, n)
        for i, field in enumerate(schema)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _concat_column(pieces: list[pa.Array], type_: pa.DataType, n: int) -> pa.Array:
    """The pieces as one column; a constant column cut from the shared one."""
    if all(p.null_count == len(p) for p in pieces):
        return constant(None, type_, n)
    if _shares_one_value(pieces):
        return constant(pieces[0][0].as_py(), type_, n)
    return pa.concat_arrays(pieces)


def _shares_one_value(pieces: list[pa.Array]) -> bool:
    """Whether every piece is a prefix of one shared constant column (``constant``).

    Such pieces start at offset 0 of one data buffer and hold no null; their first
    values are compared too, so a column that only happens to share a buffer is copied.
    """
    first = pieces[0]
    data = first.buffers()[-1]
    if data is None or first.null_count or len(first) == 0 or first.offset:
        return False
    value = first[0]
    for piece in pieces[1:]:
        other = piece.buffers()[-1]
        if (
            other is None
            or other.address != data.address
            or piece.null_count
            or len(piece) == 0
            or piece.offset
            or piece[0] != value
        ):
            return False
    return True
