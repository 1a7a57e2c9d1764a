"""Private: the buffer budget the Parquet sink partitions of one worker share.

A worker's partitions of one sink hold at most ``buffer_bytes`` in their buffers
together: beyond it the largest buffer is written early, as a smaller row group. Only
the partitions of the calling thread (one Bytewax worker) are counted and touched, so
there is no lock and no race.
"""

from __future__ import annotations

import weakref
from typing import Protocol

from thalweg_bytewax.system.thread_slots import ThreadSlots

from .config import ParquetSinkConfig

__all__ = ["BufferHolder", "flush_siblings", "keep_within_budget", "siblings"]


class BufferHolder(Protocol):
    """What the budget sees of a sink partition."""

    @property
    def config(self) -> ParquetSinkConfig:
        """The settings of its sink (one object per sink)."""
        ...

    @property
    def failed(self) -> bool:
        """Whether the partition failed (its buffers are dropped, not written)."""
        ...

    @property
    def buffered_bytes(self) -> int:
        """Bytes in all its buffers."""
        ...

    @property
    def largest_buffer(self) -> int:
        """Bytes in its largest buffer."""
        ...

    def flush_largest(self) -> int:
        """Hand its largest buffer to the writer threads; the bytes it held."""
        ...

    def flush_buffers(self) -> None:
        """Hand every buffer to the writer threads."""
        ...


# Keyed by OS thread: a cluster's worker gets a fresh ``threading.local`` every batch.
_PARTITIONS: ThreadSlots[weakref.WeakSet[BufferHolder]] = ThreadSlots(weakref.WeakSet)


def siblings() -> weakref.WeakSet[BufferHolder]:
    """The live sink partitions of the calling thread (one Bytewax worker)."""
    return _PARTITIONS.get()


def keep_within_budget(partition: BufferHolder) -> None:
    """Write the largest buffers of ``partition``'s sink on this worker until they fit."""
    mine = [p for p in siblings() if p.config is partition.config and not p.failed]
    held = sum(p.buffered_bytes for p in mine)
    while held > partition.config.buffer_bytes:
        freed = max(mine, key=lambda p: p.largest_buffer).flush_largest()
        if not freed:
            return
        held -= freed


def flush_siblings(partition: BufferHolder) -> None:
    """Hand the buffers of this worker's other partitions to the writer threads.

    Bytewax snapshots the partitions of a worker one after another; starting every
    partition's encoding first lets it run in parallel instead of one partition at a
    time (measured on the raw-lane benchmark: the final snapshot is most of a run's tail).
    """
    for sibling in list(siblings()):
        if sibling is not partition:
            sibling.flush_buffers()
