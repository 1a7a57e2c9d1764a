"""How many bytes a buffered batch holds, for sinks that cut files at a byte target."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["buffered_size"]


def buffered_size(batch: pa.RecordBatch) -> int:
    """The bytes ``batch`` holds: its slice's, or its whole buffers' where Arrow cannot tell.

    pyarrow 22 and earlier cannot measure the byte range of a sliced ``string_view`` column
    (``ArrowTypeError``); its buffers' total size then stands in (an overcount, never 0).
    """
    try:
        return int(batch.nbytes)
    except pa.ArrowTypeError:
        return int(batch.get_total_buffer_size())
