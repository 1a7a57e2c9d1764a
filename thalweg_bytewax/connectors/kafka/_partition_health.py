"""Private: the errors a Kafka source partition's client reports, and what they mean.

librdkafka reports client-level errors (brokers down, authentication) through a
callback and per-message errors with the records of a poll. :class:`ClientHealth`
sorts them: a truncated log or a fatal error fails the partition naming it and the
offset; a transient one is counted, logged once per change of state and backed off;
and a bounded run fails once the brokers have been failing for ``unreachable_timeout``.
"""

from __future__ import annotations

import logging
import time
from typing import NoReturn

from confluent_kafka import KafkaError

from thalweg_bytewax.errors import SourceError

from ._errors import is_fatal, is_truncation
from ._resume import truncation_message
from .stats import KafkaSourceStats

__all__ = ["ClientHealth"]

logger = logging.getLogger(__name__)


class ClientHealth:
    """What one partition's client reported: a fatal error, degraded, since when failing.

    Args:
        key: The partition's key (``topic:partition``), named in messages.
        stats: The partition's counters (``transient_errors``).
        unreachable_s: In a bounded run, how long the brokers may fail while nothing
            is read (``None``: tailing, wait forever).

    Attributes:
        fatal: The first fatal client error, raised at the next poll.
        degraded: Whether the client reported errors since records last arrived.
    """

    def __init__(self, key: str, stats: KafkaSourceStats, unreachable_s: float | None) -> None:
        self._key = key
        self._stats = stats
        self.fatal: KafkaError | None = None
        self.degraded = False
        # Bounded runs only: since when (monotonic) the partition has read nothing while
        # the client reported errors, the last of them, and how long that may last.
        self._unreachable_s = unreachable_s
        self._failing_since: float | None = None
        self._last_error = ""

    def on_client_error(self, err: KafkaError) -> None:
        """The consumer's ``error_cb``: keep a fatal error; count and log a transient one."""
        if is_fatal(err):
            self.fatal = self.fatal or err
            return
        self._note_failing(err)
        self._stats.transient_errors += 1
        if not self.degraded:  # log once per state change, not per error
            self.degraded = True
            logger.warning("kafka partition %s: client error %s, retrying", self._key, err.name())

    def raise_fatal(self, next_offset: int) -> NoReturn:
        """Fail the partition with the fatal client error, at ``next_offset``."""
        assert self.fatal is not None  # noqa: S101 - callers check
        msg = (
            f"kafka source: partition `{self._key}` failed at offset {next_offset}: "
            f"{self.fatal.str()} ({self.fatal.name()}); check the brokers and the "
            f"security settings in `librdkafka`"
        )
        raise SourceError(msg)

    def message_errors(
        self, errors: list[KafkaError], next_offset: int, leader_epoch: int | None
    ) -> bool:
        """Raise on a truncation or fatal consume error; count transient ones.

        Returns:
            Whether any error was transient (the poll backs off).
        """
        transient = False
        for err in errors:
            if err.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                continue
            if is_truncation(err):
                msg = truncation_message(self._key, next_offset, leader_epoch, err)
                raise SourceError(msg)
            if is_fatal(err):
                msg = (
                    f"kafka source: partition `{self._key}` failed at offset "
                    f"{next_offset}: {err.str()} ({err.name()})"
                )
                raise SourceError(msg)
            # Counted and backed off; the good records of this poll are still
            # emitted, since librdkafka's fetch position has moved past them.
            transient = True
            self._note_failing(err)
            self._stats.transient_errors += 1
            logger.warning("kafka partition %s: transient error %s", self._key, err.name())
        return transient

    def received(self) -> None:
        """Records arrived: the brokers are no longer failing."""
        self._failing_since = None

    def recovered(self) -> None:
        """A poll got records without an error: no longer degraded (logged once)."""
        if self.degraded:
            self.degraded = False
            logger.info("kafka partition %s: receiving again", self._key)

    def _note_failing(self, err: KafkaError) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._last_error = str(err.name())

    def raise_if_unreachable_too_long(self, next_offset: int, end_offset: int | None) -> None:
        """In a bounded run, fail once the brokers have been failing for the bound."""
        bound, since = self._unreachable_s, self._failing_since
        if bound is None or since is None or time.monotonic() - since < bound:
            return
        msg = (
            f"kafka source: partition `{self._key}` read nothing for {bound:g} s while the "
            f"client reported {self._last_error} (the brokers unreachable); a bounded run "
            f"(tail=False) stopped at offset {next_offset}, expected to reach "
            f"{end_offset}; check the brokers and run again (it resumes at offset "
            f"{next_offset}), or raise `unreachable_timeout`"
        )
        raise SourceError(msg)
