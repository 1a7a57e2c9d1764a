"""A process reading Kafka gives the C heap's freed pages back to the kernel.

librdkafka's fetch buffers and per-record operations are freed once the flow consumed
them, but glibc keeps freed memory below the top of a heap resident (tens of MB after a
fetch burst, docs/benchmarks.md). The source trims after each few MB of records it
emitted, at most every 0.1 s; ``THALWEG_HEAP_TRIM=off`` leaves glibc alone.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.system import heap_trim
from thalweg_bytewax.system.heap_trim import (
    HEAP_TRIM_ENV,
    MIN_TRIM_INTERVAL_S,
    TRIM_EVERY_BYTES,
    heap_trim_stats,
    note_records_read,
    start_heap_trim,
)
from thalweg_bytewax.testing import produce

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"),
    reason="malloc_trim is glibc's",
)


@pytest.fixture(autouse=True)
def fresh_trimmer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test reads the setting anew: the trimmer is made once per process."""
    monkeypatch.setattr(heap_trim, "_trimmer", None)
    monkeypatch.delenv(HEAP_TRIM_ENV, raising=False)
    yield


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@glibc_only
def test_freed_heap_memory_goes_back_to_the_kernel_once_enough_records_were_read() -> None:
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    start_heap_trim()
    note_records_read(TRIM_EVERY_BYTES)  # the first trim, so the one measured below is ours
    # 3,000 heap chunks of 64 KiB (below glibc's mmap threshold), each followed by a small
    # one kept: freeing the big ones leaves ~190 MB free below the top of the heap,
    # which glibc keeps resident.
    big, kept = [], []
    for _ in range(3000):
        p = libc.malloc(64 * 1024)
        libc.memset(p, 1, 64 * 1024)
        big.append(p)
        kept.append(libc.malloc(64))
    for p in big:
        libc.free(p)
    held = _rss_bytes()
    time.sleep(MIN_TRIM_INTERVAL_S)
    trims = heap_trim_stats().trims
    note_records_read(TRIM_EVERY_BYTES - 1)  # not yet: below the bytes between trims
    assert heap_trim_stats().trims == trims
    note_records_read(1)
    after = _rss_bytes()
    for p in kept:
        libc.free(p)
    assert heap_trim_stats().trims == trims + 1
    assert heap_trim_stats().released >= 1
    assert held - after > 150 * 1024 * 1024, (held, after)


@glibc_only
def test_trims_are_at_least_the_interval_apart() -> None:
    start_heap_trim()
    note_records_read(TRIM_EVERY_BYTES)
    first = heap_trim_stats().trims
    assert first == 1
    for _ in range(20):  # a fast catch-up: many batches within the interval
        note_records_read(TRIM_EVERY_BYTES)
    assert heap_trim_stats().trims == first
    time.sleep(MIN_TRIM_INTERVAL_S)
    note_records_read(TRIM_EVERY_BYTES)
    assert heap_trim_stats().trims == first + 1
    assert heap_trim_stats().seconds > 0


def test_off_leaves_the_heap_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEAP_TRIM_ENV, "off")
    start_heap_trim()
    for _ in range(3):
        note_records_read(TRIM_EVERY_BYTES)
        time.sleep(MIN_TRIM_INTERVAL_S)
    assert heap_trim_stats().trims == 0


def test_an_unknown_setting_is_refused_where_the_source_builds(
    monkeypatch: pytest.MonkeyPatch, kafka_bootstrap: str, make_topic: Any
) -> None:
    monkeypatch.setenv(HEAP_TRIM_ENV, "sometimes")
    topic = make_topic()
    source = KafkaSource([kafka_bootstrap], [topic])
    with pytest.raises(ConfigError, match="THALWEG_HEAP_TRIM.*`on` or `off`.*sometimes"):
        source.build_part("in", f"{topic}:0", None)


@glibc_only
def test_a_kafka_source_trims_as_it_reads(kafka_bootstrap: str, make_topic: Any) -> None:
    topic = make_topic()
    value = b"v" * 1000
    produce(
        kafka_bootstrap,
        topic,
        [{"value": value, "partition": p} for p in (0, 1) for _ in range(4_000)],
    )
    source = KafkaSource([kafka_bootstrap], [topic], batch_size=1000)
    parts = [source.build_part("in", f"{topic}:{p}", None) for p in (0, 1)]
    rows = 0
    deadline = time.monotonic() + 30
    try:
        while rows < 8_000 and time.monotonic() < deadline:
            for part in parts:
                rows += sum(b.num_rows for _, b in part.next_batch())
            time.sleep(0.02)  # ~0.4 s for the 8 MB: trims are 0.1 s apart at most
    finally:
        for part in parts:
            part.close()
    assert rows == 8_000
    assert heap_trim_stats().trims >= 1  # one a 4 MiB of records emitted, 0.1 s apart
