"""The rolling per-stage throughput digest ``/stats`` serves (last 30 s)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from thalweg_bytewax.system.thread_slots import ThreadSlots

__all__ = ["WINDOW_SECONDS", "ThroughputWindow"]

WINDOW_SECONDS = 30
"""The span of the rolling per-stage digest served by ``/stats``."""


@dataclass(slots=True)
class _Stage:
    records: int = 0
    batches: int = 0
    bytes: int = 0


class ThroughputWindow:
    """Per-stage records, batches and bytes over the last :data:`WINDOW_SECONDS`.

    One-second buckets, one deque of them per writing thread: :meth:`add` is O(1) per
    batch and takes no lock (a thread only ever touches its own buckets); :meth:`digest`
    sums every thread's.

    Args:
        seconds: The span of the window.
    """

    def __init__(self, seconds: int = WINDOW_SECONDS) -> None:
        self.seconds = seconds
        self._threads: ThreadSlots[deque[tuple[int, dict[str, _Stage]]]] = ThreadSlots(deque)

    def add(
        self,
        stage: str,
        records: int,
        nbytes: int,
        *,
        batches: int = 1,
        now: float | None = None,
    ) -> None:
        """Count ``batches`` batches of ``records`` rows and ``nbytes`` bytes for ``stage``."""
        sec = int(time.monotonic() if now is None else now)
        buckets = self._threads.get()
        if not buckets or buckets[-1][0] != sec:
            buckets.append((sec, {}))
            while buckets and buckets[0][0] <= sec - self.seconds:
                buckets.popleft()
        stages = buckets[-1][1]
        st = stages.get(stage)
        if st is None:
            st = stages[stage] = _Stage()
        st.records += records
        st.batches += batches
        st.bytes += nbytes

    def digest(self, *, now: float | None = None) -> dict[str, dict[str, float]]:
        """Per stage: records, batches, bytes, records/s and average bytes per batch/record."""
        sec = int(time.monotonic() if now is None else now)
        total: dict[str, _Stage] = {}
        for buckets in self._threads.values():
            for when, stages in list(buckets):  # copies are atomic; the writer goes on
                if when <= sec - self.seconds:
                    continue
                for name, st in list(stages.items()):
                    acc = total.setdefault(name, _Stage())
                    acc.records += st.records
                    acc.batches += st.batches
                    acc.bytes += st.bytes
        return {
            name: {
                "records": st.records,
                "batches": st.batches,
                "bytes": st.bytes,
                "records_per_s": round(st.records / self.seconds, 3),
                "avg_batch_bytes": round(st.bytes / st.batches, 1) if st.batches else 0.0,
                "avg_record_bytes": round(st.bytes / st.records, 1) if st.records else 0.0,
            }
            for name, st in sorted(total.items())
        }
