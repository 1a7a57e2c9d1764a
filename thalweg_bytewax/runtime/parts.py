"""Partition keys: ``"<topic>:<partition>"`` strings, and stable routing.

Kafka topic names cannot contain ``:``; file sources use a path as the topic, which
may, so keys are split on the *last* ``:`` (the partition is always an integer).
"""

from __future__ import annotations

import zlib

from thalweg_bytewax.errors import ConfigError

__all__ = ["decode_part", "encode_part", "stable_route"]


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
