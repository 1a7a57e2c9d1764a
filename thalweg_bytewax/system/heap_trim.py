"""Give the C heap's freed pages back to the kernel while a Kafka source reads.

librdkafka fetches ahead of the flow: whole record batches per partition, up to the
source's prefetch bound, decompressed into buffers and split into one small operation a
record, all from glibc's heaps (its threads' arenas). Once the flow has consumed them
they are freed, but glibc keeps freed memory that is not at the top of a heap: tens of
MB resident after a fetch burst, reused only as the next fetches happen to fit
(``/proc/<pid>/smaps`` on the decode memory benchmark: 101 MB of glibc heaps at the
peak, ~30 MB of it in use).

So a process that reads Kafka calls ``malloc_trim(0)`` (glibc: every arena's wholly free
pages are returned with ``madvise``) after each :data:`TRIM_EVERY_BYTES` of records its
sources emitted, at most every :data:`MIN_TRIM_INTERVAL_S`; a trim that gave back less
than :data:`WORTH_RELEASING_BYTES` doubles that wait, up to :data:`MAX_TRIM_INTERVAL_S`,
and one that gave back more resets it. A burst's freed memory goes back within a tenth
of a second, while steady reading, whose pages the fetcher would fault in again at once,
is trimmed rarely. A call costs about a millisecond on the decode memory benchmark, and
nothing happens while nothing is read. Freed memory is not returned at each ``free`` (a
lower ``M_MMAP_THRESHOLD``), since that costs a ``mmap``, page faults and a ``munmap``
for every large buffer, the native consume's included: about 10 % CPU there.

``THALWEG_HEAP_TRIM=off`` leaves glibc as it is; off glibc (musl, macOS) this is
nothing. Only the C heap is touched: Arrow's pool and polars' allocator keep their own
memory.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "HEAP_TRIM_ENV",
    "MAX_TRIM_INTERVAL_S",
    "MIN_TRIM_INTERVAL_S",
    "TRIM_EVERY_BYTES",
    "WORTH_RELEASING_BYTES",
    "HeapTrimStats",
    "heap_trim_stats",
    "note_records_read",
    "start_heap_trim",
]

HEAP_TRIM_ENV = "THALWEG_HEAP_TRIM"
"""``off`` leaves the C heap as glibc keeps it; ``on`` (default)."""

TRIM_EVERY_BYTES = 4 * 1024 * 1024
"""Bytes of records the process's sources emit between two trims."""

MIN_TRIM_INTERVAL_S = 0.1
"""The least time between two trims, so a fast catch-up pays at most ten a second."""

MAX_TRIM_INTERVAL_S = 5.0
"""The longest wait between two trims once trims give back little."""

WORTH_RELEASING_BYTES = 4 * 1024 * 1024
"""A trim that gives back less doubles the wait before the next (up to the maximum)."""


@dataclass(slots=True)
class HeapTrimStats:
    """What the trims of this process did so far."""

    trims: int = 0
    """``malloc_trim`` calls."""
    released_bytes: int = 0
    """Resident memory the calls gave back (the process's RSS before less after)."""
    seconds: float = 0.0
    """Wall time spent in them."""


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int:
    """The process's resident memory (0 where ``/proc`` cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


class _Trimmer:
    """The process's one trimmer: counts emitted bytes and trims when they add up."""

    def __init__(
        self,
        trim: Callable[[int], int] | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        rss: Callable[[], int] = _rss_bytes,
    ) -> None:
        self._trim = trim
        self._clock = clock
        self._rss = rss
        self._pending = 0
        self._last = -MAX_TRIM_INTERVAL_S
        self._interval = MIN_TRIM_INTERVAL_S
        self._lock = threading.Lock()
        self.stats = HeapTrimStats()

    def note(self, nbytes: int) -> None:
        if self._trim is None:
            return
        self._pending += nbytes  # a lost add under a race only delays one trim
        if self._pending < TRIM_EVERY_BYTES:
            return
        now = self._clock()
        if now - self._last < self._interval or not self._lock.acquire(blocking=False):
            return
        try:
            self._pending = 0
            start = time.perf_counter()
            before = self._rss()
            self._trim(0)  # ctypes drops the GIL for the call
            released = max(0, before - self._rss())
            self._last = self._clock()
            # A trim that gave back little means the heap holds little free: wait longer
            # for the next, so steady reading does not fault the same pages in again.
            worth = released >= WORTH_RELEASING_BYTES
            self._interval = (
                MIN_TRIM_INTERVAL_S if worth else min(2 * self._interval, MAX_TRIM_INTERVAL_S)
            )
            stats = self.stats
            stats.trims += 1
            stats.released_bytes += released
            stats.seconds += time.perf_counter() - start
        finally:
            self._lock.release()


def _glibc_trim() -> Callable[[int], int] | None:
    choice = os.environ.get(HEAP_TRIM_ENV, "on").strip().lower()
    if choice not in ("on", "off"):
        msg = f"`{HEAP_TRIM_ENV}`: expected `on` or `off`; got `{choice}`"
        raise ConfigError(msg)
    if choice == "off":
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):  # not glibc: nothing to trim this way
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_trimmer: _Trimmer | None = None
_start_lock = threading.Lock()


def _get() -> _Trimmer:
    global _trimmer  # noqa: PLW0603 - one per process, made on first use
    if _trimmer is None:
        with _start_lock:
            if _trimmer is None:
                _trimmer = _Trimmer(_glibc_trim())
    return _trimmer


def start_heap_trim() -> None:
    """Read ``THALWEG_HEAP_TRIM`` once; called where a source builds a partition.

    Raises:
        ConfigError: it is neither ``on`` nor ``off``.
    """
    _get()


def note_records_read(nbytes: int) -> None:
    """Count ``nbytes`` of records a source emitted; trim the C heap when due (module)."""
    _get().note(nbytes)


def heap_trim_stats() -> HeapTrimStats:
    """This process's trims so far.

    All zero before a source built a partition, where trimming is off, and off glibc.
    """
    trimmer = _trimmer
    return HeapTrimStats() if trimmer is None else trimmer.stats
