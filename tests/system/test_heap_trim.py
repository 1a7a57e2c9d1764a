"""A process reading Kafka gives the C heap's freed pages back to the kernel.

librdkafka's fetch buffers and per-record operations are freed once the flow consumed
them, but glibc keeps freed memory below the top of a heap resident (tens of MB after a
fetch burst, docs/benchmarks.md). The source trims after each few MB of records it
emitted, at most every 0.1 s, and less often while trims give back little;
``THALWEG_HEAP_TRIM=off`` leaves glibc alone.
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_probe
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.system import heap_trim
from thalweg_bytewax.system.heap_trim import (
    HEAP_TRIM_ENV,
    MAX_TRIM_INTERVAL_S,
    MIN_TRIM_INTERVAL_S,
    TRIM_EVERY_BYTES,
    WORTH_RELEASING_BYTES,
    _Trimmer,
    heap_trim_stats,
    note_records_read,
    start_heap_trim,
)
from thalweg_bytewax.testing import produce

REPO = Path(__file__).resolve().parents[2]

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


# In a fresh interpreter: one that ran other tests holds an unknown heap, whose free
# chunks the allocations below may or may not reuse.
PROBE = """
import ctypes, json, os
from thalweg_bytewax.system.heap_trim import (
    TRIM_EVERY_BYTES, heap_trim_stats, note_records_read, start_heap_trim,
)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
start_heap_trim()
# 3,000 heap chunks of 64 KiB (below glibc's mmap threshold), each followed by a small
# one kept: freeing the big ones leaves ~190 MB free below the top of the heap, which
# glibc keeps resident.
big, kept = [], []
for _ in range(3000):
    p = libc.malloc(64 * 1024)
    libc.memset(p, 1, 64 * 1024)
    big.append(p)
    kept.append(libc.malloc(64))
for p in big:
    libc.free(p)
held = rss()
note_records_read(TRIM_EVERY_BYTES - 1)
trims_short = heap_trim_stats().trims
note_records_read(1)
after = rss()
print(json.dumps({
    "trims_short": trims_short,
    "trims": heap_trim_stats().trims,
    "rss_drop": held - after,
    "released_bytes": heap_trim_stats().released_bytes,
}))
"""


def probe(**env: str) -> dict[str, Any]:
    return run_probe(PROBE, env=env, unset=[HEAP_TRIM_ENV])


@pytest.mark.slow
@glibc_only
def test_freed_heap_memory_goes_back_to_the_kernel_once_enough_records_were_read() -> None:
    seen = probe()
    assert seen["trims_short"] == 0  # not yet: below the bytes between trims
    assert seen["trims"] == 1
    assert seen["rss_drop"] > 150 * 1024 * 1024, seen
    assert seen["released_bytes"] > 150 * 1024 * 1024, seen
    off = probe(THALWEG_HEAP_TRIM="off")
    assert off["trims"] == 0
    assert off["rss_drop"] < 16 * 1024 * 1024, off  # glibc alone keeps it


TICK = 1 / 64  # a batch emitted every 1/64 s: exact in binary, so no rounding below


class Reading:
    """A source emitting 1 MiB every TICK through a trimmer whose trims give back
    `give_back` bytes of resident memory each; the times of the trims."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.resident = 10 << 30
        self.give_back = 0
        self.trimmed_at: list[float] = []
        self.trimmer = _Trimmer(self._trim, clock=lambda: self.now, rss=lambda: self.resident)

    def _trim(self, pad: int) -> int:
        assert pad == 0
        self.trimmed_at.append(self.now)
        self.resident -= self.give_back
        return 1

    def read_for(self, seconds: float, nbytes: int = 1 << 20) -> list[float]:
        """The gaps between the trims made while reading for `seconds`."""
        start = len(self.trimmed_at)
        for _ in range(round(seconds / TICK)):
            self.trimmer.note(nbytes)
            self.now += TICK
        times = self.trimmed_at[max(0, start - 1) :]
        return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_trims_wait_longer_while_they_give_back_little() -> None:
    """A catch-up emits many batches a second: trims stay 0.1 s apart at least; one that
    gave back little doubles the wait, up to 5 s; one that gave back a few MB (a fetch
    burst's freed memory) brings it back to 0.1 s."""
    run = Reading()
    run.give_back = 40 << 20
    burst = run.read_for(1.0)
    assert len(burst) >= 7
    assert all(MIN_TRIM_INTERVAL_S <= gap < MIN_TRIM_INTERVAL_S + TICK for gap in burst)

    run.give_back = 64 << 10  # steady reading: little to give back
    steady = run.read_for(30.0)
    # 0.1, then 0.2, 0.4, 0.8, 1.6, 3.2, then 5 s apart (each within one batch's tick)
    waits = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert len(steady) >= len(waits)
    for gap, wait in zip(steady, waits, strict=False):
        assert wait <= gap < wait + TICK, (steady, waits)
    assert max(steady) < MAX_TRIM_INTERVAL_S + TICK

    run.give_back = WORTH_RELEASING_BYTES  # a new burst
    again = run.read_for(6.0)
    assert again[0] < MAX_TRIM_INTERVAL_S + TICK  # the 5 s wait still running
    assert all(gap < MIN_TRIM_INTERVAL_S + TICK for gap in again[1:])
    assert len(again) >= 5
    assert run.trimmer.stats.trims == len(run.trimmed_at)
    assert run.trimmer.stats.released_bytes > 0


def test_trims_follow_what_was_read_not_the_clock() -> None:
    run = Reading()
    run.read_for(100.0, nbytes=0)  # a source with nothing to read: no trim, however long
    assert run.trimmed_at == []
    run.read_for(1.0, nbytes=TRIM_EVERY_BYTES // 8)  # 64 batches of 512 KiB: 32 MiB
    # the first after 4 MiB; each gave back nothing, so the next waited 0.2 s, then 0.4
    assert len(run.trimmed_at) == 3


def test_off_leaves_the_heap_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEAP_TRIM_ENV, "off")
    start_heap_trim()
    for _ in range(3):
        note_records_read(TRIM_EVERY_BYTES)
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


@glibc_only
def test_stats_and_metrics_show_what_the_trims_did() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

    from thalweg_bytewax.observability.meters import Metrics

    reader = InMemoryMetricReader()
    metrics = Metrics([reader])
    assert metrics.stats()["heap_trim"] == {"trims": 0, "released_bytes": 0, "seconds": 0.0}
    start_heap_trim()
    note_records_read(TRIM_EVERY_BYTES)
    shown = metrics.stats()["heap_trim"]
    assert shown["trims"] == 1
    assert shown["seconds"] > 0
    assert shown["released_bytes"] == heap_trim_stats().released_bytes
    data = reader.get_metrics_data()
    assert data is not None
    exported = {
        m.name: p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name.startswith("thalweg_heap_trim")
        for p in m.data.data_points
        if isinstance(p, NumberDataPoint)
    }
    assert exported == {
        "thalweg_heap_trims_total": 1,
        "thalweg_heap_trim_released_bytes_total": heap_trim_stats().released_bytes,
    }
