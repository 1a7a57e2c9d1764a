"""Partition keys: ``"<topic>:<partition>"`` strings, and routing them to sink shards.

Kafka topic names cannot contain ``:``; file sources use a path as the topic, which
may, so keys are split on the *last* ``:`` (the partition is always an integer).

**Co-located shards.** Bytewax 0.21.1 gives each partition of a step a primary worker:
when every worker lists the same partitions, the partition at index ``i`` of the
sorted listing goes to worker ``π(i mod W)`` (``W`` workers over all processes, ``π`` a
permutation that depends on ``W`` only). That holds for a source's partitions and for
a sink's shards alike, so a sink that sends the source partition at sorted index ``i``
to shard ``i mod S`` writes it on the worker that reads it whenever ``S`` is a multiple
of ``W``: no batch is handed to another worker, and none is pickled to another
process. Every source here announces its listing (:func:`announce_listing`) and
:func:`route` uses it; a key no source of this process listed (a stream keyed by
something else, the keys of a source that does not announce) routes by
:func:`stable_route`.
``tests/runtime/test_colocation.py`` pins the assignment on the pinned Bytewax.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "announce_listing",
    "decode_part",
    "encode_part",
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
    """Record a source's partition listing for :func:`route`, and return it as a list.

    A source's ``list_parts`` returns ``announce_listing(keys)``. Each key's index in
    the sorted listing (Bytewax orders partitions as sorted strings) is what places
    its primary worker, so a sink can put the key's shard on the same worker. Every
    worker of every process lists the same partitions, so every process routes a key
    alike; a key announced again takes the index of its newest listing.
    """
    listing = list(keys)
    for index, key in enumerate(sorted(listing)):
        _LISTED[key] = index
    return listing


def route(key: str, n: int) -> int:
    """The shard of ``key`` among ``n``: the source partition's own worker where known.

    A key a source of this process announced goes to shard ``index mod n`` (its index
    in the sorted listing), which Bytewax places on the worker that reads the source
    partition when ``n`` is a multiple of the workers; any other key routes by
    :func:`stable_route`. Both are the same in every process of a run. A key whose
    shard changes between runs (the source gained partitions, ``shards`` changed) is
    safe for the sinks that route by it: each reads what the target holds of a
    partition when it first writes it.
    """
    index = _LISTED.get(key)
    return index % n if index is not None else stable_route(key, n)
