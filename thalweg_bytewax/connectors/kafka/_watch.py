"""Private: notice partitions added to a topic while the flow runs.

Bytewax lists a ``FixedPartitionedSource``'s partitions once, at start, so a partition
added later cannot be read until the flow restarts (where it then starts at its
earliest offset, see ``KafkaSource.build_part``). This watch makes the condition
visible: a background thread asks for the topics' metadata every interval (one request
for all topics), logs each newly seen partition once, counts them, and can make the
source fail so that an orchestrator restarts the flow. ``next_batch`` only reads its
result, so it never waits on the brokers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaException

from thalweg_bytewax.connectors._shared_thread import SharedThread

from ._config import consumer_config

__all__ = ["PartitionWatch"]

logger = logging.getLogger(__name__)


class PartitionWatch(SharedThread):
    """Compare the topics' partitions with those listed at start, every ``interval_s``.

    Shared by the partitions of one source in one process; the thread runs while at
    least one partition holds the watch.
    """

    def __init__(
        self,
        brokers: Sequence[str],
        add_config: Mapping[str, Any],
        listed: Mapping[str, frozenset[int]],
        *,
        interval_s: float,
        timeout_s: float,
    ) -> None:
        super().__init__("thalweg-kafka-watch")
        self._config = consumer_config(brokers, add_config)
        self._listed = dict(listed)
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self.unread: dict[str, tuple[int, ...]] = {}
        """Partitions per topic that exist now but were not listed: never read."""
        self.new_partitions = 0
        """Partitions seen appearing since start (a counter, never decreases)."""
        self.checks = 0
        """Metadata checks done."""

    def _run(self, stop: threading.Event) -> None:
        consumer = Consumer(self._config)
        try:
            while not stop.wait(self._interval_s):
                self.check(consumer)
        finally:
            consumer.close()

    def check(self, consumer: Consumer) -> None:
        """One metadata request for every topic; record and log partitions not listed."""
        try:
            md = consumer.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            # The partitions' own polls report an outage; this check just tries again.
            logger.debug("kafka source: partition check failed (%s)", exc)
            return
        self.checks += 1
        for topic, listed in self._listed.items():
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                continue
            unread = tuple(sorted(set(tmd.partitions) - listed))
            known = self.unread.get(topic, ())
            if unread and unread != known:
                self.new_partitions += len(set(unread) - set(known))
                self.unread[topic] = unread
                logger.warning(
                    "kafka source: topic %s gained partitions %s while the flow runs; they "
                    "are not read until the flow restarts (then from their earliest offset)",
                    topic,
                    ",".join(map(str, unread)),
                )
