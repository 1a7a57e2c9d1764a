"""What ``thalweg coverage`` shows: per sink, covered ranges, gaps and lag.

Lag is measured two ways, each optional:

- against the raw lane: the offsets the raw lane's coverage holds that a sink's does
  not (what ``thalweg recover`` can replay into it), when the raw lane's sink id is
  given;
- against the source: the offsets between the partition's low and high watermark that
  a sink does not cover, when the watermarks are given (:func:`kafka_watermarks` asks
  the brokers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.coverage.spans import OffsetCoverage, Span
from thalweg_bytewax.coverage.store import CoverageEntry, CoverageStore
from thalweg_bytewax.errors import ConfigError, SourceError

__all__ = ["coverage_report", "kafka_watermarks"]

# Spans listed per row before the rest are only counted, so a ragged partition does not
# make a thousand-line report.
_MAX_SPANS = 20


def _missing(sink: OffsetCoverage, spans: Iterable[Span]) -> list[Span]:
    return [gap for lo, hi in spans for gap in sink.uncovered(lo, hi)]


def _count(spans: Iterable[Span]) -> int:
    return sum(hi - lo + 1 for lo, hi in spans)


def coverage_report(
    store: CoverageStore,
    *,
    sink: str | None = None,
    raw_lane: str | None = None,
    watermarks: Mapping[tuple[str, int], tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """One row per (sink, topic, partition): ranges, gaps and lag, as plain data.

    Args:
        store: The coverage store.
        sink: Only this sink (default: every sink).
        raw_lane: The raw lane's sink id in the store, to measure lag against it.
        watermarks: ``(low, high)`` per ``(topic, partition)``, ``high`` being the next
            offset the source will write, to measure lag against the source.

    Returns:
        Rows with ``sink, topic, partition, ranges, gaps, first, last, covered,
        updated_at`` and, when asked, ``behind_raw`` / ``missing_vs_raw`` and
        ``high_watermark`` / ``behind_source`` / ``missing_vs_source``.

    Raises:
        ConfigError: When ``raw_lane`` names no sink in the store.
    """
    everything = store.entries()
    raw: dict[tuple[str, int], OffsetCoverage] = {}
    if raw_lane is not None:
        raw = {(e.topic, e.partition): e.coverage for e in everything if e.sink == raw_lane}
        if not raw:
            known = ", ".join(sorted({f"`{e.sink}`" for e in everything})) or "none"
            msg = (
                f"coverage: raw lane `{raw_lane}` expected a sink in {store.describe()}; "
                f"got sinks {known} (give `--raw-lane` the raw lane's step id)"
            )
            raise ConfigError(msg)
    chosen = [e for e in everything if sink is None or e.sink == sink]
    rows = [_row(e, raw, raw_lane, watermarks) for e in chosen]
    if raw_lane is not None:
        # A sink that never recorded a partition the raw lane holds is behind by all of
        # it: report that partition too, or the lag would hide exactly the worst case.
        sinks = {e.sink for e in chosen} | ({sink} if sink is not None else set())
        seen = {(e.sink, e.topic, e.partition) for e in chosen}
        for name in sorted(sinks - {raw_lane}):
            for topic, partition in sorted(raw):
                if (name, topic, partition) not in seen:
                    empty = CoverageEntry(name, topic, partition, OffsetCoverage(), None)
                    rows.append(_row(empty, raw, raw_lane, watermarks))
    return rows


def _row(
    e: CoverageEntry,
    raw: Mapping[tuple[str, int], OffsetCoverage],
    raw_lane: str | None,
    watermarks: Mapping[tuple[str, int], tuple[int, int]] | None,
) -> dict[str, Any]:
    cov = e.coverage
    gaps = cov.gaps()
    row: dict[str, Any] = {
        "sink": e.sink,
        "topic": e.topic,
        "partition": e.partition,
        "ranges": cov.to_list()[:_MAX_SPANS],
        "range_count": len(cov.spans),
        "gaps": [list(g) for g in gaps[:_MAX_SPANS]],
        "gap_count": len(gaps),
        "first": cov.first,
        "last": cov.last,
        "covered": cov.size,
        "updated_at": e.updated_at.isoformat() if e.updated_at is not None else None,
    }
    key = (e.topic, e.partition)
    if raw_lane is not None and e.sink != raw_lane:
        missing = _missing(cov, raw.get(key, OffsetCoverage()).spans)
        row["behind_raw"] = _count(missing)
        row["missing_vs_raw"] = [list(s) for s in missing[:_MAX_SPANS]]
    if watermarks is not None and key in watermarks:
        low, high = watermarks[key]
        missing = _missing(cov, [(low, high - 1)]) if high > low else []
        row["high_watermark"] = high
        row["behind_source"] = _count(missing)
        row["missing_vs_source"] = [list(s) for s in missing[:_MAX_SPANS]]
    return row


def kafka_watermarks(
    bootstrap: str,
    keys: Iterable[tuple[str, int]],
    *,
    timeout: timedelta | Unset = UNSET,
    timeout_s: float | Unset = UNSET,
) -> dict[tuple[str, int], tuple[int, int]]:
    """The ``(low, high)`` watermarks of topic-partitions, asked of the brokers.

    Args:
        bootstrap: ``host:port[,host:port]`` of the brokers.
        keys: The ``(topic, partition)`` pairs.
        timeout: Time bound of each request (default 10 s).
        timeout_s: Deprecated: ``timeout`` in seconds.

    Raises:
        SourceError: When the brokers do not answer.
        ConfigError: When ``timeout`` is no positive ``timedelta``, or given under both
            names.
    """
    bound = duration_keyword(
        "kafka_watermarks",
        "timeout",
        timeout,
        "timeout_s",
        timeout_s,
        default=timedelta(seconds=10),
    )
    from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "thalweg-coverage",
            "enable.auto.commit": False,
        }
    )
    try:
        out = {}
        for topic, partition in sorted(set(keys)):
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=bound, cached=False)
            out[(topic, partition)] = (int(low), int(high))
        return out
    except KafkaException as exc:
        msg = (
            f"coverage: brokers `{bootstrap.split(',', maxsplit=1)[0]}` gave no watermarks "
            f"({exc.args[0].name() if exc.args else 'no reason'}); expected reachable "
            f"brokers for `--bootstrap`, or leave it out"
        )
        raise SourceError(msg) from exc
    finally:
        consumer.close()
