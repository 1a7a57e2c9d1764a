"""A batch's payload column as the codecs read it: one contiguous binary array."""

from __future__ import annotations

import pyarrow as pa

from thalweg_bytewax.codecs.base import PayloadsInput

__all__ = ["as_binary"]


def as_binary(payloads: PayloadsInput) -> pa.BinaryArray:
    """``payloads`` as one binary array: chunks combined, other binary types cast."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if not isinstance(payloads, pa.Array):
        return pa.array(list(payloads), pa.binary())
    if pa.types.is_binary(payloads.type):
        return payloads
    return payloads.cast(pa.binary())
