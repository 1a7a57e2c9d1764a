"""Private: a ``KafkaSink`` partition's producer reports, turned into the sink's errors.

The producer reports a failed record through its delivery callback and a fatal client
state through its error callback, both served from within ``poll``/``flush``.
:class:`DeliveryReports` collects them and raises them at the next step of the epoch
protocol as the error a person can act on: transient (the epoch replays on resume),
terminal (fix the topic or the records), or fenced (a newer producer took over the
transactional id: this process is a zombie).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from thalweg_bytewax.errors import SinkError, SinkTerminalError, SinkTransientError

from ._errors import is_fatal

__all__ = ["DeliveryReports"]

# Delivery errors a healthy cluster gets over: a record that timed out (a slow or
# unreachable broker) can be produced again on resume.
_TRANSIENT_DELIVERY = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,  # noqa: SLF001 - librdkafka's public local error codes
        KafkaError._PURGE_QUEUE,  # noqa: SLF001
        KafkaError._PURGE_INFLIGHT,  # noqa: SLF001
    }
)


# A newer producer took over the transactional id: this one is a zombie.
_FENCED = frozenset(
    {
        KafkaError._FENCED,  # noqa: SLF001 - librdkafka's public local error code
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)


def _terminal(err: KafkaError) -> bool:
    """Whether a delivery error needs a person (vs. the epoch replaying on resume)."""
    if err.fatal():
        return True
    if err.retriable() or err.code() in _TRANSIENT_DELIVERY:
        return False
    return is_fatal(err)


class DeliveryReports:
    """The delivery and client errors one sink partition's producer reported.

    Args:
        component: The sink's name in messages (``kafka sink `topic```).
        topic: The output topic.
        shard: The partition's shard.
        transactional_id: The producer's ``transactional.id`` (``None``: not
            transactional), named when the producer is fenced.

    Attributes:
        fenced: Whether a newer producer took over the transactional id; a fenced
            producer can no longer abort, purge or talk to the coordinator.
    """

    def __init__(
        self, component: str, topic: str, shard: int, transactional_id: str | None
    ) -> None:
        self._component = component
        self._topic = topic
        self._shard = shard
        self._transactional_id = transactional_id
        self._errors: list[tuple[KafkaError, int | None]] = []
        self._fatal: KafkaError | None = None
        self.fenced = False

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        """The producer's ``on_delivery`` callback: keep a failed record's error."""
        if err is not None:
            self._errors.append((err, msg.partition() if msg is not None else None))

    def on_client_error(self, err: KafkaError) -> None:
        """The producer's ``error_cb``: keep the first fatal client error."""
        if err.fatal():
            self._fatal = self._fatal or err

    def fenced_error(self, err: KafkaError) -> SinkTerminalError:
        """The error of a zombie: what happened and what to do, for the run's last line."""
        self.fenced = True
        msg = (
            f"{self._component}: shard {self._shard} was fenced: a newer producer took over "
            f"its transactional id `{self._transactional_id}` ({err.name()}), so this "
            f"process is a zombie (another run of this flow took over while it was "
            f"stalled or cut off); its open transaction is aborted and none of its epoch "
            f"is visible to `read_committed` consumers; stop this process and keep the "
            f"newer run, which owns the output (expected one running process per flow)"
        )
        return SinkTerminalError(msg)

    def raise_errors(self) -> None:
        """Raise what was reported since the last call, if anything failed.

        Raises:
            SinkTerminalError: The producer failed fatally or was fenced, or a record
                failed for a reason a person must fix.
            SinkTransientError: Records failed for a reason the epoch's replay gets over.
        """
        if self._fatal is not None:
            err = self._fatal
            if err.code() in _FENCED:
                raise self.fenced_error(err)
            msg = (
                f"{self._component}: the producer failed fatally ({err.name()}); expected "
                f"a healthy idempotent producer; restart the flow (the epoch replays)"
            )
            raise SinkTerminalError(msg)
        if not self._errors:
            return
        failed = self._errors
        self._errors = []
        fenced = next((e for e, _ in failed if e.code() in _FENCED), None)
        if fenced is not None:
            raise self.fenced_error(fenced)
        err, partition = failed[0]
        where = f"`{self._topic}:{partition}`" if partition is not None else f"`{self._topic}`"
        terminal = any(_terminal(e) for e, _ in failed)
        msg = (
            f"{self._component}: {len(failed)} records failed delivery, the first to "
            f"{where}: {err.name()}; expected every record acknowledged; "
            + (
                "fix the topic or the records and restart (the epoch replays)"
                if terminal
                else "check the brokers: the epoch replays on resume"
            )
        )
        raise (SinkTerminalError if terminal else SinkTransientError)(msg)

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call a producer method, its ``KafkaException`` raised as the sink's error.

        Args:
            what: What the call does, for the message (``commit the epoch's transaction``).
            fn: The producer method (or a function calling it).
            *args: Its arguments.
        """
        try:
            fn(*args)
        except KafkaException as exc:
            raise self.error_of(what, exc) from exc

    def error_of(self, what: str, exc: KafkaException) -> SinkError:
        """The sink's error for a producer call that raised ``exc``.

        Args:
            what: What the call did, for the message (``produce the epoch's records``).
            exc: What the producer raised.

        Returns:
            The fenced error of a zombie; otherwise a transient error for a retriable
            failure and a terminal one for the rest.
        """
        err: KafkaError = exc.args[0]
        if err.code() in _FENCED:
            return self.fenced_error(err)
        cls: type[SinkError] = (
            SinkTransientError if err.retriable() and not err.fatal() else SinkTerminalError
        )
        msg = (
            f"{self._component}: could not {what}: {err.name()}; check the brokers: "
            f"the epoch replays on resume"
        )
        return cls(msg)
