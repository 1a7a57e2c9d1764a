"""Private: JSON payloads without their framing, one at a time or a column at a time.

``framing="confluent"`` puts magic byte 0 and a 4-byte schema id in front of each JSON
body (peeled, not looked up); ``"none"`` is bare JSON. A null payload (a tombstone) or a
frame too short or without the magic byte is a failure of its row, with the same
message either way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs._json_values import JsonDecodeError
from thalweg_bytewax.codecs.base import DecodeFailure, FailureKind, Framing
from thalweg_bytewax.codecs.framing import peel_confluent_batch

__all__ = ["json_body", "json_bodies"]


def json_body(payload: bytes | None, framing: Framing) -> bytes:
    """The JSON body of one payload.

    Raises:
        JsonDecodeError: A null payload, or a Confluent frame without magic byte and id.
    """
    if payload is None:
        msg = "json payload is null (tombstone)"
        raise JsonDecodeError(msg, FailureKind.NULL_PAYLOAD)
    if framing is Framing.CONFLUENT:
        if len(payload) < 5 or payload[0] != 0:  # noqa: PLR2004 - magic + 4-byte id
            msg = (
                f"json framing: expected Confluent magic byte 0 and a 4-byte schema id; "
                f"got {len(payload)} bytes starting with {payload[:1]!r}"
            )
            raise JsonDecodeError(msg, FailureKind.BAD_FRAMING)
        return payload[5:]
    return payload


def json_bodies(
    arr: pa.Array, framing: Framing
) -> tuple[pa.Array, np.ndarray, list[DecodeFailure]]:
    """The bodies without framing, the rows that have one, failures of the others."""
    body = arr
    if framing is Framing.CONFLUENT:
        good = pc.and_(arr.is_valid(), peel_confluent_batch(arr)[1])
        longest = pc.max(pc.binary_length(arr)).as_py() or 0
        body = pc.binary_slice(arr, 5, max(longest, 5))  # stop=None trips a resize bug
        good_np = good.to_numpy(zero_copy_only=False)
    elif arr.null_count:
        good_np = arr.is_valid().to_numpy(zero_copy_only=False)
    else:
        good_np = np.ones(len(arr), np.bool_)
    errors: list[DecodeFailure] = []
    for i in np.flatnonzero(~good_np):
        try:
            json_body(arr[i].as_py(), framing)
        except JsonDecodeError as exc:
            errors.append(DecodeFailure(int(i), exc.kind, str(exc)))
    return body, good_np, errors
