"""Shared benchmark plumbing: run one variant in a child process and read its result."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence

COMPRESSIONS = ("none", "lz4", "zstd", "snappy", "gzip")
"""The producer ``compression.type`` values a benchmark's ``--compression`` takes."""


def byte_compile() -> None:
    """Compile the project's packages to ``__pycache__``, as installing a wheel does.

    Without it, a checkout run with ``PYTHONDONTWRITEBYTECODE`` set recompiles every
    thalweg module from source in each process a variant starts: a start-up cost no
    installed user pays, paid once more for every process of a cluster.
    """
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for package in ("thalweg_bytewax", "flows", "benchmarks"):
        if not compileall.compile_dir(root / package, quiet=1):
            raise SystemExit(f"byte-compiling {root / package} failed")


def status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB; None where absent."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def rss_mb() -> float:
    """Resident set size of this process now (``VmRSS``), in MB; 0 where unknown."""
    return status_mb("VmRSS") or 0.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process since it started its program, in MB.

    Read from ``VmHWM`` (the high-water mark of this program's own address space) where
    the system has it. ``ru_maxrss`` is not that: Linux carries the peak of the address
    space a process replaced at ``exec`` into it, and ``subprocess`` starts a child with
    ``vfork``, whose address space is the parent's, so every variant's ``ru_maxrss``
    started at the driver's peak (measured: a child of a 311 MB parent read 311 MB
    before doing anything), which hid growth below the driver's size.
    """
    peak = status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def malloc_mb() -> dict[str, float]:
    """glibc's heap (``mallinfo2``): bytes handed out (``in_use``) and kept free, in MB.

    Empty where the C library has no ``mallinfo2`` (not glibc, or glibc before 2.33).
    """
    import ctypes

    class _Mallinfo2(ctypes.Structure):
        _fields_ = [  # noqa: RUF012 - ctypes' own layout
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return {}
    info = libc.mallinfo2()
    return {
        "malloc_in_use_mb": (info.uordblks + info.hblkhd) / 2**20,
        "malloc_free_mb": info.fordblks / 2**20,
    }


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
    """Yield ``bootstrap``, or the address of a local broker started for the run.

    ``--bootstrap apache`` starts Apache Kafka (one KRaft node; needs Java, and Maven
    the first time); an empty value starts librdkafka's mock cluster.
    """
    if bootstrap == "apache":
        import tempfile
        from pathlib import Path

        from thalweg_bytewax.dev._apache_kafka import ApacheKafka
        from thalweg_bytewax.dev._kafka_jars import default_cache_dir, fetch_jars

        jars = fetch_jars(default_cache_dir())
        with tempfile.TemporaryDirectory() as home, ApacheKafka(jars, Path(home)) as kafka:
            yield kafka.bootstrap
        return
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


def run_processes(base: Sequence[str], *, name: str, count: int = 2) -> list[dict[str, float]]:
    """Run ``count`` processes of one Bytewax cluster (``base --proc-id i --addresses ...``).

    Each process prints a JSON object as its last line; they are returned in process order.
    """
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        addresses = ",".join(f"127.0.0.1:{sock.getsockname()[1]}" for sock in socks)
    finally:
        for sock in socks:
            sock.close()
    procs = [
        subprocess.Popen(
            [*base, "--proc-id", str(i), "--addresses", addresses],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    outs = []
    for proc in procs:
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{name}: a process failed ({proc.returncode})")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs
