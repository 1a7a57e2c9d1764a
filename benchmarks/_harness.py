"""Shared benchmark plumbing: run one variant in a child process and read its result."""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
from collections.abc import Iterator, Sequence


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(script: str, args: Sequence[str], *, name: str) -> dict[str, float]:
    """Run ``script`` with ``args`` in a fresh interpreter; its last stdout line is JSON.

    Each variant runs in its own process so that its peak RSS is its own.
    """
    out = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@contextlib.contextmanager
def broker(bootstrap: str) -> Iterator[str]:
    """Yield ``bootstrap``, or the address of a local mock cluster started for the run."""
    if bootstrap:
        yield bootstrap
        return
    from thalweg_bytewax.testing import MockCluster

    with MockCluster() as cluster:
        yield cluster.bootstrap


def check_retention(bootstrap: str, topics: Sequence[str], partitions: int = 4) -> None:
    """Fail if the broker already dropped records of a topic (the mock keeps ~5 MB each)."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        for t in topics:
            for p in range(partitions):
                low, _ = probe.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                if low != 0:
                    msg = f"broker dropped records of {t}:{p} (low watermark {low}); use fewer"
                    raise SystemExit(msg)
    finally:
        probe.close()
