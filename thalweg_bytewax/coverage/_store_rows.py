"""What both coverage stores keep a row as: an entry, its spans as JSON, the checks on a write.

:mod:`~thalweg_bytewax.coverage.store` (SQLite) and
:mod:`~thalweg_bytewax.coverage.postgres` (PostgreSQL) store the same rows, one per
``(sink, topic, partition)``; what they share lives here so that neither imports the other.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from thalweg_bytewax.coverage.spans import OffsetCoverage
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

__all__ = ["CoverageEntry", "PartitionKey"]

PartitionKey = tuple[str, int]
"""A source partition: ``(topic, partition)``."""


@dataclass(frozen=True, slots=True)
class CoverageEntry:
    """What one sink holds of one source partition, as stored.

    Attributes:
        sink: The sink's id (its step id, e.g. ``"orders.raw_lane"``).
        topic: The source topic (file sources: the path).
        partition: The source partition.
        coverage: The covered offsets, merged by union.
        updated_at: When the row was last merged into (UTC); None in a report row for a
            partition the sink never recorded.
    """

    sink: str
    topic: str
    partition: int
    coverage: OffsetCoverage
    updated_at: datetime | None


def _check_sink(sink: object) -> str:
    if not isinstance(sink, str) or not sink:
        msg = f"coverage store: `sink` expected a non-empty sink id; got {sink!r}"
        raise ConfigError(msg)
    return sink


def _decode(where: str, sink: str, topic: str, partition: int, text: object) -> OffsetCoverage:
    try:
        data = json.loads(text) if isinstance(text, str | bytes) else text
        return OffsetCoverage.from_list(data)  # type: ignore[arg-type]
    except (ValueError, ConfigError) as exc:
        msg = (
            f"coverage store {where}: row `{sink}` `{topic}:{partition}` expected ranges as "
            f"`[[first, last], ...]`; got {str(text)[:80]!r} (the row was not written by "
            f"thalweg; move it aside)"
        )
        raise SinkTerminalError(msg) from exc


def _encode(coverage: OffsetCoverage) -> str:
    return json.dumps(coverage.to_list(), separators=(",", ":"))


def _merge_plan(
    sink: str, coverage: Mapping[PartitionKey, OffsetCoverage]
) -> list[tuple[str, int, OffsetCoverage]]:
    plan = []
    for key, held in sorted(coverage.items()):
        cov = OffsetCoverage.checked(held, f"coverage store: `{sink}` `{key}`")
        if cov:
            plan.append((key[0], int(key[1]), cov))
    return plan  # sorted: concurrent multi-row writers lock rows in one order (PostgreSQL)


def _parse_ts(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value))


def _entries(
    where: str, rows: Iterable[tuple[str, str, int, object, object]]
) -> list[CoverageEntry]:
    """The stored rows ``(sink, topic, partition, ranges, updated_at)`` as entries."""
    return [
        CoverageEntry(s, t, int(p), _decode(where, s, t, p, r), _parse_ts(u))
        for s, t, p, r, u in rows
    ]


def _forget_keys(partitions: Iterable[PartitionKey]) -> list[tuple[str, int]]:
    """``partitions`` once each, sorted (concurrent writers lock rows in one order)."""
    return sorted({(t, int(p)) for t, p in partitions})


class _UnionStore(ABC):
    """What both stores do the same way around their storage: check, sort, skip empties.

    A store implements :meth:`_merge` and :meth:`_delete`, each in one transaction.
    """

    def record(self, sink: str, coverage: Mapping[PartitionKey, OffsetCoverage]) -> None:
        """Merge ``coverage`` into the sink's rows by union, in one transaction.

        Args:
            sink: The sink's id.
            coverage: Per ``(topic, partition)``, the offsets that landed.

        Raises:
            SinkTransientError: When the store is busy past its timeout or unreachable
                (SQLite: the file locked or unwritable; PostgreSQL: the server
                unreachable or the connection dropped).
            SinkTerminalError: When the store cannot be written or holds rows that are
                not coverage.
        """
        plan = _merge_plan(_check_sink(sink), coverage)
        if plan:
            self._merge(sink, plan)

    def forget(self, sink: str, partitions: Iterable[PartitionKey]) -> None:
        """Delete the sink's rows of ``partitions``, in one transaction.

        Args:
            sink: The sink's id.
            partitions: The ``(topic, partition)`` pairs whose rows go.

        Raises:
            SinkTransientError: When the store is busy past its timeout or unreachable.
        """
        keys = _forget_keys(partitions)
        if keys:
            self._delete(sink, keys)

    @abstractmethod
    def _merge(self, sink: str, plan: list[tuple[str, int, OffsetCoverage]]) -> None:
        """Union each ``(topic, partition, coverage)`` of ``plan`` into its stored row."""

    @abstractmethod
    def _delete(self, sink: str, keys: list[tuple[str, int]]) -> None:
        """Delete the sink's rows of ``keys`` (``(topic, partition)``, sorted)."""
