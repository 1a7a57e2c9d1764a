"""Placement: every source partition's stateful steps and sink shard on the worker reading it.

Bytewax 0.21.1 routes a stateful step's key to worker ``h(key) mod W``, where ``h`` is
Rust's ``DefaultHasher`` (SipHash-1-3 with zero keys) over the key's UTF-8 bytes and a
``0xff`` terminator, and ``W`` counts the workers of all processes. It places each
partition of a source or sink on one of the workers that listed it (the least loaded,
in sorted order). So thalweg turns both rules the same way:

* every source partition ``K`` has a **routing key** :func:`routing_key` — ``K`` and a
  salt, a pure function of ``K`` — whose hash is the partition's target number (its
  partition number, offset by its topic) modulo :data:`BALANCE_MODULUS`;
* a source lists ``K`` on the worker ``h(routing_key(K)) mod W`` only
  (:func:`~thalweg_bytewax.runtime.parts.announce_listing`), so that worker reads it;
* ``twg.dedup``, ``twg.validate`` (with windowed rules) key their state by the routing
  key, so Bytewax runs them on that same worker, in any worker count;
* an epoch sink lists shard ``s`` on worker ``s mod W`` only and routes ``K`` to shard
  ``w``, the first shard of ``K``'s worker ``w`` (:func:`shard_on_worker`).

Nothing is handed to another worker, so nothing is pickled to another process, and the
per-process admission budget sees every batch its sources emit acknowledged by its own
sinks. The routing key does not depend on ``W`` or on the listing, so keyed state is
found at any worker count after a resume (Bytewax routes its snapshots by the same
hash), and a topic that gains partitions keeps every key. The salt only balances: the
partitions of a topic land on consecutive workers whenever ``W`` divides
:data:`BALANCE_MODULUS` (1–10, 12, 14, 15, 16, 18, 20, 21, 24, …); for other ``W`` the
placement is still local, but as even as a hash.

The worker count comes from the cluster's settings: ``python -m bytewax.run``'s own
arguments, or :func:`declare_cluster` (``thalweg run`` calls it); the worker's index from
its thread's name (``timely:work-<i>``, the engine's worker threads), plus the
process's index times the workers per process. Outside a run (a command listing
partitions) a source lists every partition, and when the settings are unknown
(``bytewax.testing.run_main`` or ``cluster_main`` called from Python without
:func:`declare_cluster`) every worker does and Bytewax places the partitions itself, as
before: the data stays correct, only batches may cross
(:mod:`~thalweg_bytewax.runtime.crossings` counts them).
``tests/runtime/test_placement.py`` pins these rules on the pinned Bytewax. The hash
itself, Rust's ``DefaultHasher`` as Bytewax applies it, is :mod:`._siphash`'s.
"""

from __future__ import annotations

import functools
import logging
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from thalweg_bytewax.runtime._bytewax_run import bytewax_run_arguments
from thalweg_bytewax.runtime._siphash import (
    siphash13,
    siphash13_many,
    state_key_bytes,
    state_worker,
)

__all__ = [
    "BALANCE_MODULUS",
    "Worker",
    "cluster_declared",
    "cluster_processes",
    "declare_cluster",
    "partition_of_routing_key",
    "routing_key",
    "run_size",
    "shard_on_worker",
    "siphash13",
    "state_worker",
    "this_worker",
]

logger = logging.getLogger(__name__)

BALANCE_MODULUS = 5040
"""Routing keys hash to their target modulo this (2⁴·3²·5·7): even for any ``W`` dividing it."""

_SALT_SEP = "@"
_SALT_WIDTH = 8  # hex digits
_SUFFIX = 1 + _SALT_WIDTH
_THREAD_PREFIX = "timely:work-"


# -- routing keys ------------------------------------------------------------------------


def _target(key: str) -> int:
    """The number a partition's routing key hashes to: its partition, offset by its topic."""
    topic, sep, part = key.rpartition(":")
    base = zlib.adler32(topic.encode("utf-8", "surrogatepass")) if sep else 0
    number = int(part) if sep and part.isdigit() else zlib.adler32(key.encode("utf-8", "ignore"))
    return (base + number) % BALANCE_MODULUS


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


@functools.lru_cache(maxsize=65536)
def routing_key(key: str) -> str:
    """The key a partition's stateful steps keep their state under: ``key@<8 hex>``.

    A pure function of ``key``: the smallest salt whose key hashes (as Bytewax hashes
    state keys) to the partition's target modulo :data:`BALANCE_MODULUS`. The same in
    every process, run and worker count.
    """
    prefix = np.frombuffer(state_key_bytes(f"{key}{_SALT_SEP}")[:-1], np.uint8)
    target = _target(key)
    chunk = 4 * BALANCE_MODULUS
    shifts = np.arange(_SALT_WIDTH - 1, -1, -1, dtype=np.uint64) * np.uint64(4)
    for start in range(0, 1 << (4 * _SALT_WIDTH), chunk):
        salts = np.arange(start, start + chunk, dtype=np.uint64)
        digits = _HEX[((salts[:, None] >> shifts[None, :]) & np.uint64(15)).astype(np.intp)]
        messages = np.empty((chunk, prefix.size + _SALT_WIDTH + 1), np.uint8)
        messages[:, : prefix.size] = prefix
        messages[:, prefix.size : prefix.size + _SALT_WIDTH] = digits
        messages[:, -1] = 0xFF
        hashes = siphash13_many(messages)
        hits = np.flatnonzero(hashes % np.uint64(BALANCE_MODULUS) == np.uint64(target))
        if hits.size:
            return f"{key}{_SALT_SEP}{int(salts[hits[0]]):0{_SALT_WIDTH}x}"
    msg = f"routing key: no salt of {key!r} hashes to {target}"  # pragma: no cover
    raise AssertionError(msg)  # pragma: no cover - 2**32 salts, each a 1/5040 chance


def partition_of_routing_key(routed: str) -> str:
    """The partition key a :func:`routing_key` was made from (its salt cut off)."""
    return routed[:-_SUFFIX]


# -- the cluster ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Worker:
    """One worker of the cluster: its index over all processes, and how many there are."""

    index: int
    count: int


@dataclass(frozen=True, slots=True)
class _Cluster:
    process: int
    processes: int
    workers_per_process: int


_declared: _Cluster | None = None
_warned = False
_run_size = 0
"""The worker count of the run a worker of known size listed partitions for (0: none)."""


def run_size() -> int:
    """The worker count of this process's run, once a worker of it listed partitions (else 0)."""
    return _run_size


def note_run_size(workers: int) -> None:
    """A worker of a run of ``workers`` workers listed partitions (the same for all)."""
    global _run_size  # noqa: PLW0603 - one run at a time per process
    _run_size = workers


def declare_cluster(
    *, workers_per_process: int = 1, process_id: int | None = None, processes: int = 1
) -> None:
    """Tell placement the cluster this process runs in, before the dataflow starts.

    ``python -m bytewax.run`` needs no declaration (its arguments are read); a program
    calling ``bytewax.run.cli_main`` or ``bytewax.testing.cluster_main`` itself
    declares what it passes there, or its sources list every partition on every
    worker and Bytewax places them (correct, but batches may cross workers).

    Args:
        workers_per_process: Worker threads of each process (``-w``).
        process_id: This process's index (``-i``), None for a single process.
        processes: How many processes (the addresses of ``-a``).
    """
    global _declared  # noqa: PLW0603 - one cluster per process
    _declared = _Cluster(process_id or 0, max(processes, 1), max(workers_per_process, 1))


@contextmanager
def cluster_declared(
    *, workers_per_process: int = 1, process_id: int | None = None, processes: int = 1
) -> Iterator[None]:
    """:func:`declare_cluster` for one run: the declaration ends with the block."""
    global _declared, _run_size  # noqa: PLW0603 - one cluster per process
    previous = _declared
    declare_cluster(
        workers_per_process=workers_per_process, process_id=process_id, processes=processes
    )
    try:
        yield
    finally:
        _declared = previous
        _run_size = 0


def _from_bytewax_run() -> _Cluster | None:
    """The cluster ``python -m bytewax.run`` was started for (its parsed arguments)."""
    kwargs = bytewax_run_arguments()
    if kwargs is None:
        return None
    addresses = kwargs.get("addresses") or []
    return _Cluster(
        kwargs.get("process_id") or 0,
        max(len(addresses), 1),
        kwargs.get("workers_per_process") or 1,
    )


def cluster_processes() -> int | None:
    """How many processes this run has (declared, or ``bytewax.run``'s), None if unknown."""
    cluster = _declared or _from_bytewax_run()
    return cluster.processes if cluster is not None else None


def _thread_name() -> str | None:
    """This OS thread's name (the engine names its worker threads), None where unreadable."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return None


def this_worker() -> Worker | None:
    """The worker running this thread, or None when it is not known.

    The main thread is worker 0 of 1 in a run of one worker (Bytewax runs it there);
    anywhere else outside the engine's worker threads (a command listing partitions,
    a test) nothing is known.
    """
    global _warned  # noqa: PLW0603 - warn once per process
    name = _thread_name()
    if name is None:
        return None
    cluster = _declared or _from_bytewax_run()
    if not name.startswith(_THREAD_PREFIX):
        single = cluster is not None and cluster.processes * cluster.workers_per_process == 1
        return Worker(0, 1) if single else None
    local = int(name[len(_THREAD_PREFIX) :])
    if cluster is None or local >= cluster.workers_per_process:
        if not _warned:
            _warned = True
            logger.warning(
                "placement: the cluster's size is unknown in this process (call "
                "thalweg_bytewax.runtime.placement.declare_cluster before "
                "cluster_main); Bytewax places partitions, and batches may cross workers"
            )
        return None
    return Worker(
        cluster.process * cluster.workers_per_process + local,
        cluster.processes * cluster.workers_per_process,
    )


def shard_on_worker(key: str, shards: int, worker_count: int) -> int | None:
    """The shard of source partition ``key`` among ``shards`` listed ``s`` on worker ``s mod W``.

    Shard ``w``, the first of ``key``'s reading worker ``w``: one shard a worker (its
    shards run on one thread, so more would only add commits). None when that worker
    has no shard (fewer shards than workers).
    """
    worker = state_worker(routing_key(key), worker_count)
    return worker if worker < shards else None
