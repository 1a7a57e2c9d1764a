"""Private: a Parquet sink partition's background writes, in order and bounded in flight.

Encoding and compressing Parquet releases the GIL, so the process's writer threads
(:func:`~thalweg_bytewax.connectors.parquet._stream.io_pool`) write row groups while the
flow keeps polling and building the next batches, and the files of several
topic-partitions compress in parallel at a snapshot. :class:`WriteQueue` keeps the
writes of one file in order (each waits for its predecessor), lets at most a few row
groups per thread wait in memory, and :meth:`WriteQueue.drain` awaits all of them before
anything becomes visible.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from ._stream import TopicPartitionStream, io_pool, io_threads

__all__ = ["WriteQueue"]

# Row groups queued for the writer thread before the flow waits: bounds memory at a few
# row groups per sink partition while keeping the writer busy.
_MAX_PENDING_WRITES = 2


class WriteQueue:
    """The writes one sink partition handed to the process's writer threads."""

    def __init__(self) -> None:
        self._threads = io_threads()
        self._io = io_pool()
        self._pending: deque[Future[None]] = deque()

    def submit(
        self,
        stream: TopicPartitionStream,
        fn: Callable[..., object],
        *args: object,
        **kwargs: object,
    ) -> None:
        """Run ``fn(*args, **kwargs)`` on a writer thread after the stream's last write.

        Waits first while too many writes are in flight; a failed earlier write is
        raised here.
        """
        while len(self._pending) >= _MAX_PENDING_WRITES * self._threads:
            self._pending.popleft().result()  # re-raises a failed write here
        before = stream.last_write

        def job() -> None:
            if before is not None:
                before.result()  # FIFO pool: the predecessor already started
            fn(*args, **kwargs)

        stream.last_write = self._io.submit(job)
        self._pending.append(stream.last_write)

    def drain(self) -> None:
        """Await every pending write; raise the first failure once all have ended."""
        first: BaseException | None = None
        while self._pending:
            try:
                self._pending.popleft().result()
            except BaseException as exc:  # noqa: BLE001 - raised below, after the rest
                first = first or exc
        if first is not None:
            raise first

    def each(self, fn: Callable[[str], object], items: Iterable[str]) -> None:
        """``fn`` over ``items`` on the writer threads at once (fsyncs wait on the disk)."""
        for done in [self._io.submit(fn, item) for item in items]:
            done.result()
