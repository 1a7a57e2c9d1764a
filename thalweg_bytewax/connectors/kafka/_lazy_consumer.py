"""Private: a confluent-kafka consumer opened only when something asks it a question.

With the native batch consume the data plane is a librdkafka handle shared by the
worker's partitions; the confluent-kafka consumer only answers metadata, watermark and
timestamp lookups, which the source's listing usually answered already. Opening it only
on first use keeps a listed partition from opening a handle (and its threads) of its
own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer

__all__ = ["LazyConsumer"]


class LazyConsumer:
    """Stands in for a ``Consumer``; the real one is created on the first attribute read."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        """Keep ``settings`` for the consumer this may open.

        Args:
            settings: confluent-kafka consumer settings.
        """
        self._settings = dict(settings)
        self._consumer: Consumer | None = None

    @property
    def opened(self) -> bool:
        """Whether the consumer was created."""
        return self._consumer is not None

    def __getattr__(self, name: str) -> Any:
        """Delegate to the consumer, creating it first if needed."""
        if self._consumer is None:
            self._consumer = Consumer(self._settings)
        return getattr(self._consumer, name)

    def close(self) -> None:
        """Close the consumer if it was created."""
        if self._consumer is not None:
            self._consumer.close()
