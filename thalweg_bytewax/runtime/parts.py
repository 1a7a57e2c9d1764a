"""Partition keys: ``"<topic>:<partition>"`` strings, and routing them to sink shards.

Kafka topic names cannot contain ``:``; file sources use a path as the topic, which
may, so keys are split on the *last* ``:`` (the partition is always an integer).

**Placement.** In a run of several workers whose size is known
(:mod:`~thalweg_bytewax.runtime.placement`), a source lists each partition on one worker
only: the worker Bytewax runs the partition's :func:`~thalweg_bytewax.runtime.placement.routing_key`
on, where ``twg.dedup`` and ``twg.validate`` keep its state. A sink lists shard ``s`` on
worker ``s mod W`` and :func:`route` sends a partition to the first shard of its
reading worker, so no batch is handed to another worker or pickled to another process, for
any worker count with at least as many shards as workers. Every source here announces
its listing (:func:`announce_listing`); a key no source of this process listed (a
stream keyed by something else, the keys of a source that does not announce) routes by
:func:`stable_route`. Where the run's size is unknown, every worker lists every
partition and Bytewax places the partition at index ``i`` of the sorted listing on
worker ``i mod W``; :func:`route` then sends it to shard ``i mod n``, on the reading
worker when ``n`` is a multiple of ``W``.
``tests/runtime/test_colocation.py`` and ``tests/runtime/test_placement.py`` pin both on
the pinned Bytewax.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime import crossings as _crossings  # noqa: F401 - counts pickled batches
from thalweg_bytewax.runtime.placement import (
    note_run_size,
    routing_key,
    run_size,
    shard_on_worker,
    state_worker,
    this_worker,
)
from thalweg_bytewax.runtime.state_keys import new_run

__all__ = [
    "announce_listing",
    "decode_part",
    "encode_part",
    "listed_on_this_worker",
    "route",
    "stable_route",
]

_LISTED: dict[str, int] = {}
"""Each announced partition key's index in the sorted listing that announced it last."""


def encode_part(topic: str, partition: int) -> str:
    """The partition key of a topic-partition, e.g. ``"orders:3"``."""
    return f"{topic}:{partition}"


def decode_part(key: str) -> tuple[str, int]:
    """Split a partition key back into ``(topic, partition)``.

    Raises:
        ConfigError: When ``key`` is not ``"<topic>:<int>"``.
    """
    topic, sep, part = key.rpartition(":")
    if not sep or not topic or not part.lstrip("-").isdigit():
        msg = f"partition key: expected `<topic>:<partition>`; got {key!r}"
        raise ConfigError(msg)
    return topic, int(part)


def stable_route(key: str, n: int) -> int:
    """Route ``key`` to one of ``n`` buckets, the same in every process and run.

    Python's ``hash()`` is salted per process, so it must never route data.
    """
    return zlib.adler32(key.encode("utf-8", "surrogatepass")) % n


def announce_listing(keys: Sequence[str]) -> list[str]:
    """Record a source's partition listing for :func:`route`; return what this worker lists.

    A source's ``list_parts`` returns ``announce_listing(keys)``. On a worker of a run
    whose size is known, that is the keys this worker reads (those whose routing key
    Bytewax hashes to it); elsewhere all of them. Each key's index in the sorted
    listing is recorded too (Bytewax's own placement when every worker lists every
    key). Every worker of every process lists the same keys, so every process routes a
    key alike; a key announced again takes the index of its newest listing. Routed
    steps decide their state keys afresh after it (:func:`~.state_keys.new_run`).
    """
    listing = list(keys)
    new_run()  # a run lists its partitions first: routed steps look at its store again
    for index, key in enumerate(sorted(listing)):
        _LISTED[key] = index
    worker = this_worker()
    if worker is None:
        return listing
    note_run_size(worker.count)
    if worker.count == 1:
        return listing
    return [k for k in listing if state_worker(routing_key(k), worker.count) == worker.index]


def listed_on_this_worker(names: Sequence[str]) -> list[str]:
    """The sink shards (``names[s]``) this worker lists: ``s mod W`` is its index.

    Every shard when the run's size is unknown, or off a worker thread.
    """
    worker = this_worker()
    if worker is None:
        return list(names)
    note_run_size(worker.count)
    if worker.count == 1:
        return list(names)
    return [name for s, name in enumerate(names) if s % worker.count == worker.index]


def route(key: str, n: int) -> int:
    """The shard of ``key`` among ``n``: one on the source partition's reading worker.

    A key a source of this process announced goes, in a run whose size is known, to
    the first shard of the worker that reads it
    (:func:`~thalweg_bytewax.runtime.placement.shard_on_worker`: one shard a worker, so
    one commit a worker and epoch; with fewer shards than workers, the keys of a worker
    without one go to shard ``index mod n``); else to shard ``index mod n`` (its index
    in the sorted listing).
    Any other key routes by :func:`stable_route`. All are the same in every process of
    a run. A key whose shard changes between runs (the worker count, the source's
    partitions or ``shards`` changed) is safe for the sinks that route by it: each
    reads what the target holds of a partition when it first writes it.
    """
    index = _LISTED.get(key)
    if index is None:
        return stable_route(key, n)
    workers = run_size()
    if workers:
        shard = shard_on_worker(key, n, workers)
        if shard is not None:
            return shard
    return index % n
