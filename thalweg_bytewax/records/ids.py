"""The record id: a deterministic 128-bit id of a source record, computed per batch.

The same record read twice (a redelivery, a replay, a second run) gets the same id;
any difference in its source identity, offset or payload gives a different one.
:func:`record_ids_array` computes a batch's ids in one native call where the package
was built with OpenSSL's headers, else with :mod:`hashlib`; the ids are identical.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax._deps import log_fallback_once
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.system.threads import SharedPool

__all__ = ["RECORD_ID_BYTES", "record_id", "record_ids", "record_ids_array"]

RECORD_ID_BYTES = 16
"""Width of ``_twg_record_id`` (SHA-256 truncated to 128 bits)."""

# Domain separation makes the digest specific to this use and versioned: changing the
# record-id recipe means a new tag, never a silent change of ids. SHA-256 rather than
# BLAKE2b because CPUs hash it in hardware: measured here per record, 0.61 vs 0.88 us
# at 405 bytes and 1.56 vs 2.63 us at 2 kB (docs/benchmarks.md "raw lane").
_RECORD_ID_TAG = b"twg-record-id-v1\x00"
logger = logging.getLogger(__name__)

try:
    from thalweg_bytewax import _record_ids as _native_ids
except ImportError:  # built without OpenSSL's headers: hashlib computes the same ids
    _native_ids = None  # type: ignore[assignment]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_BYTES_LIKE = (bytes, bytearray, memoryview)
# Payload column types record ids hash as bytes (UTF-8 text is bytes).
_VALUE_TYPES = frozenset(
    {pa.binary(), pa.large_binary(), pa.string(), pa.large_string(), pa.null()}
)


def _short(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _check_int(name: str, value: object, bounds: tuple[int, int], bits: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        msg = f"record ids: `{name}` expected an int; got {_short(value)}"
        raise ConfigError(msg)
    if not bounds[0] <= int(value) <= bounds[1]:
        msg = (
            f"record ids: `{name}` expected a {bits}-bit signed int "
            f"({bounds[0]}..{bounds[1]}); got {int(value)}"
        )
        raise ConfigError(msg)


def _check_source(cluster: object, topic: object, partition: object) -> None:
    """A ``ConfigError`` naming the argument unless the source identity is well typed."""
    if cluster is not None and not isinstance(cluster, str):
        msg = f"record ids: `cluster` expected a str or None; got {_short(cluster)}"
        raise ConfigError(msg)
    if not isinstance(topic, str):
        msg = f"record ids: `topic` expected a str; got {_short(topic)}"
        raise ConfigError(msg)
    _check_int("partition", partition, _INT32, 32)


def _check_value(value: object, where: str = "") -> None:
    if value is not None and not isinstance(value, _BYTES_LIKE):
        msg = f"record ids: `value{where}` expected bytes or None; got {_short(value)}"
        raise ConfigError(msg)


def _id_prefix(cluster: str | None, topic: str, partition: int) -> bytes:
    # Length-prefixed fields so that no two distinct inputs share an encoding; a null
    # cluster and an empty one differ by the flag byte.
    topic_b = topic.encode("utf-8", "surrogatepass")
    if cluster is None:
        head = b"\x00"
    else:
        cluster_b = cluster.encode("utf-8", "surrogatepass")
        head = b"\x01" + struct.pack(">I", len(cluster_b)) + cluster_b
    return head + struct.pack(">I", len(topic_b)) + topic_b + struct.pack(">i", partition)


def _hasher(cluster: str | None, topic: str, partition: int) -> hashlib._Hash:
    h = hashlib.sha256(_RECORD_ID_TAG)
    h.update(_id_prefix(cluster, topic, partition))
    return h


_OFFSET_NULL = struct.Struct(">qB")


def record_id(
    cluster: str | None, topic: str, partition: int, offset: int, value: bytes | None
) -> bytes:
    """The deterministic record id: SHA-256/128 over cluster, topic, partition, offset, payload.

    The same record read twice (a redelivery, a replay, a second run) gets the same id;
    any difference in an input gives a different id. A null payload (tombstone) and an
    empty payload hash differently.

    Args:
        cluster: The source cluster id, or ``None`` when unknown.
        topic: The topic (file sources: the file path).
        partition: The partition number.
        offset: The offset (file sources: the row index).
        value: The payload bytes, envelope intact, or ``None`` for a tombstone.

    Returns:
        16 bytes.

    Raises:
        ConfigError: An argument has the wrong type, the partition is outside the int32
            range or the offset outside the int64 range.
    """
    _check_source(cluster, topic, partition)
    _check_int("offset", offset, _INT64, 64)
    _check_value(value)
    h = _hasher(cluster, topic, partition)
    h.update(_OFFSET_NULL.pack(offset, 0 if value is None else 1))
    if value is not None:
        h.update(value)
    return h.digest()[:RECORD_ID_BYTES]


def record_ids(
    cluster: str | None,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    values: Iterable[bytes | None],
) -> list[bytes]:
    """:func:`record_id` for many records of one partition, sharing the prefix work.

    Raises:
        ConfigError: As :func:`record_id`, naming the index of a bad offset or value, or
            when ``offsets`` and ``values`` differ in length.
    """
    _check_source(cluster, topic, partition)
    vals = values if isinstance(values, Sequence) else list(values)
    if len(offsets) != len(vals):
        msg = (
            f"record ids: `offsets` and `values` expected the same length; got "
            f"{len(offsets)} and {len(vals)}"
        )
        raise ConfigError(msg)
    base = _hasher(cluster, topic, partition)
    pack = _OFFSET_NULL.pack
    out: list[bytes] = []
    append = out.append
    try:
        for offset, value in zip(offsets, vals, strict=True):
            h = base.copy()
            h.update(pack(offset, 0) if value is None else pack(offset, 1) + value)
            append(h.digest()[:RECORD_ID_BYTES])
    except (struct.error, TypeError) as exc:
        # Checked only once something failed, so the loop stays as tight as before.
        i = len(out)
        _check_int(f"offsets[{i}]", offsets[i], _INT64, 64)
        _check_value(vals[i], f"s[{i}]")
        msg = f"record ids: record {i} could not be hashed ({type(exc).__name__})"
        raise ConfigError(msg) from exc
    return out


def _check_columns(offsets: object, values: object) -> tuple[pa.Array, pa.Array]:
    """``(offsets, values)`` as plain arrays, or a ``ConfigError`` naming the argument."""
    cols: list[pa.Array] = []
    for name, col in (("offsets", offsets), ("values", values)):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()  # noqa: PLW2901 - the one array of the column
        if not isinstance(col, pa.Array):
            msg = f"record ids: `{name}` expected an Arrow array; got {_short(col)}"
            raise ConfigError(msg)
        cols.append(col)
    offs, vals = cols
    if not pa.types.is_integer(offs.type):
        msg = f"record ids: `offsets` expected an int64 Arrow array; got `{offs.type}`"
        raise ConfigError(msg)
    if vals.type not in _VALUE_TYPES:
        msg = f"record ids: `values` expected a binary Arrow array; got `{vals.type}`"
        raise ConfigError(msg)
    if len(offs) != len(vals):
        msg = (
            f"record ids: `offsets` and `values` expected the same length; got "
            f"{len(offs)} and {len(vals)}"
        )
        raise ConfigError(msg)
    if offs.null_count:
        msg = f"record ids: `offsets` expected no nulls; got {offs.null_count}"
        raise ConfigError(msg)
    if pa.types.is_uint64(offs.type) and len(offs):
        top = pc.max(offs).as_py()
        if top > _INT64[1]:
            msg = f"record ids: `offsets` expected int64 values; got {top}"
            raise ConfigError(msg)
    if pa.types.is_null(vals.type):
        vals = vals.cast(pa.binary())
    return offs, vals


def record_ids_array(
    cluster: str | None,
    topic: str,
    partition: int,
    offsets: pa.Array,
    values: pa.Array,
) -> pa.FixedSizeBinaryArray:
    """:func:`record_ids` over Arrow columns (int64 offsets, binary payloads).

    Computed in one native call when the package was built with OpenSSL's headers
    (no Python object per record), else with :mod:`hashlib`; the ids are identical.

    Raises:
        ConfigError: ``cluster``, ``topic`` or ``partition`` as :func:`record_id`;
            ``offsets`` not an integer Arrow array of int64 values without nulls;
            ``values`` not a binary (or string) Arrow array of the same length.
    """
    _check_source(cluster, topic, partition)
    offsets, values = _check_columns(offsets, values)
    id_type = pa.binary(RECORD_ID_BYTES)
    if not pa.types.is_binary(values.type):  # large_binary: 64-bit offsets
        values = values.cast(pa.large_binary())
        ids = record_ids(cluster, topic, partition, offsets.to_pylist(), values.to_pylist())
        return pa.array(ids, id_type)
    if _native_ids is None:
        log_fallback_once(  # a warning: shown without any logging set up, as documented
            logger,
            logging.WARNING,
            "record ids: the native hasher is not built (no OpenSSL headers at install); "
            "hashing with hashlib, about 3x slower per record",
        )
        ids = record_ids(cluster, topic, partition, offsets.to_pylist(), values.to_pylist())
        return pa.array(ids, id_type)
    n = len(values)
    if n == 0:
        return pa.array([], id_type)
    offs = offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    start = values.offset
    voffs = np.frombuffer(values.buffers()[1], np.int32)[start : start + n + 1]
    data = values.buffers()[2]
    valid = (
        values.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
        if values.null_count
        else b""
    )
    prefix = _RECORD_ID_TAG + _id_prefix(cluster, topic, partition)
    offs = np.ascontiguousarray(offs)
    voffs = np.ascontiguousarray(voffs)
    body = b"" if data is None else data
    native = _native_ids.record_ids
    parts = min(_HASH_THREADS, n // _HASH_SPLIT_ROWS)
    if parts < 2:
        digests = native(prefix, offs, voffs, body, valid)
        return pa.Array.from_buffers(id_type, n, [None, pa.py_buffer(digests)])
    # The hasher releases the GIL: large batches hash in slices on several cores.
    cuts = np.linspace(0, n, parts + 1).astype(np.int64)
    ranges = list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))
    pieces = list(
        _hash_pool().map(
            lambda r: native(
                prefix,
                offs[r[0] : r[1]],
                voffs[r[0] : r[1] + 1],
                body,
                valid[r[0] : r[1]] if len(valid) else b"",
            ),
            ranges,
        )
    )
    return pa.Array.from_buffers(id_type, n, [None, pa.py_buffer(b"".join(pieces))])


# Batches of at least twice this many records hash in slices on up to _HASH_THREADS
# threads (the per-slice overhead is a few microseconds; a slice hashes in ~1 ms).
_HASH_SPLIT_ROWS = 8192
_HASH_THREADS = max(1, min(os.cpu_count() or 1, 4))
_hash_pool = SharedPool(_HASH_THREADS, "twg-record-ids")
