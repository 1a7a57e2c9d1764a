"""Admission control: a flow's sources wait while their bytes are not yet staged.

Bytewax 0.21.1 holds a source back only at epoch boundaries: a partition emits into
epoch ``e`` once every output has finished ``e - 1``, but *within* an epoch it emits as
fast as it reads. With one worker the source and the sink share a thread, so a slow
sink slows the reads; with two or more, a sink shard on another worker receives
batches through an unbounded channel, and a file read in one epoch queues whole in
front of a sink that is ten times slower (docs/benchmarks.md "Admission").

The ledger here bounds what waits between workers, per flow and process, in bytes:

* a source partition records each batch it emits (:meth:`AdmissionLedger.emitted`:
  its last offset and its Arrow size);
* an epoch sink acknowledges each source partition's rows as it stages them
  (:meth:`AdmissionLedger.acknowledged`: staged through offset ``o``); a batch stops
  counting once every sink of the process that acknowledges its partition staged
  through its last offset;
* before reading, a partition asks :meth:`AdmissionLedger.admit`: while its flow has
  more than the budget (:data:`DEFAULT_ADMISSION_BYTES`, or ``THALWEG_ADMISSION_BYTES``)
  emitted and not staged, it reads nothing and is woken again shortly (``next_awake``),
  never blocking the worker.

A flow is held only once an epoch sink of it is built in the process
(:meth:`AdmissionLedger.expect_acknowledgements`, before its first write); a flow whose
sinks do not acknowledge (Bytewax's own sinks, a sink without locators) runs as before,
bounded by the epoch alone. A source never waits forever: when nothing of a partition
is acknowledged for :data:`RELEASE_AFTER` (its sink's shard is in another process, a
sink stopped receiving it, all its rows were filtered away), its bytes are released and
stop counting until a sink of the process acknowledges it again. Nothing here is
recovery state: a restart starts every account empty.

The accounts are per process (workers are threads of a process and share them) and per
flow (the first part of a step id), so a flow's sources and sinks meet here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "ADMISSION_BYTES_ENV",
    "DEFAULT_ADMISSION_BYTES",
    "RELEASE_AFTER",
    "RETRY_AFTER",
    "AdmissionLedger",
    "admission_budget",
    "flow_of",
    "ledger",
]

logger = logging.getLogger(__name__)

ADMISSION_BYTES_ENV = "THALWEG_ADMISSION_BYTES"
"""The variable that sets the budget in bytes (``0``: no admission control)."""

# 64 MiB per flow and process: eight of the largest Kafka polls (8 MiB), a dozen 64k-row
# file chunks, so a fast sink never waits on the ledger while a slow one holds a bounded
# queue; see docs/benchmarks.md "Admission".
DEFAULT_ADMISSION_BYTES = 64 * 1024 * 1024
"""Bytes a flow's source partitions may have emitted and not yet staged, per process."""

RELEASE_AFTER = 10.0
"""Seconds without an acknowledgement after which a partition's bytes stop counting (the
default Bytewax epoch): a sink that does not receive it never holds it forever."""

RETRY_AFTER = timedelta(milliseconds=20)
"""How soon a held partition asks again."""


def admission_budget() -> int:
    """The budget per flow and process: ``THALWEG_ADMISSION_BYTES``, else the default.

    Raises:
        ConfigError: When the variable is not a non-negative integer.
    """
    raw = os.environ.get(ADMISSION_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_ADMISSION_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        msg = (
            f"admission control: expected `{ADMISSION_BYTES_ENV}` to be a number of bytes "
            f"(0 turns it off); got {raw!r}"
        )
        raise ConfigError(msg)
    return value


def flow_of(step_id: str) -> str:
    """The flow a step id belongs to: its first dotted part (``"orders.kafka_in"``)."""
    return step_id.split(".", 1)[0]


@dataclass
class _Account:
    """One source partition's emitted, unacknowledged batches."""

    pending: deque[tuple[int, int]] = field(default_factory=deque)  # (last offset, bytes)
    in_flight: int = 0
    # Per sink of this process: the offset it wrote through, and when (monotonic).
    acknowledged: dict[str, tuple[int, float]] = field(default_factory=dict)
    since: float = 0.0  # monotonic: the last acknowledgement, or the first byte in flight
    # False once released without an acknowledgement, until one comes: its sink is not
    # in this process (or does not acknowledge), so its bytes do not count.
    counted: bool = True


@dataclass
class _Flow:
    """One flow's accounts in this process, and whether a sink here acknowledges."""

    accounts: dict[str, _Account] = field(default_factory=dict)
    in_flight: int = 0
    acknowledging: bool = False
    held: bool = False


class AdmissionLedger:
    """Per flow: bytes its sources emitted that its sinks have not yet staged.

    Thread-safe; one per process (:func:`ledger`). Partition keys are the sources'
    item keys (``"orders:3"``), which the epoch sinks also keep their coverage by.

    Args:
        budget: Bytes a flow's source partitions may have in flight, together, before
            they wait (``0``: never).
        release_after: Seconds without an acknowledgement after which a partition's
            bytes stop counting.
    """

    def __init__(self, budget: int, *, release_after: float = RELEASE_AFTER) -> None:
        self.budget = budget
        self.release_after = release_after
        self.releases = 0
        """How many times a partition's bytes were released for want of acknowledgements."""
        self.waits = 0
        """How many reads were put off because the flow was over its budget."""
        self._lock = threading.Lock()
        self._flows: dict[str, _Flow] = {}

    def _flow(self, flow: str) -> _Flow:
        found = self._flows.get(flow)
        if found is None:
            found = self._flows[flow] = _Flow()
        return found

    def expect_acknowledgements(self, flow: str) -> None:
        """Note that a sink of this process acknowledges ``flow``'s partitions.

        Called when an epoch sink's partition is built, before its first write, so
        the flow's sources are held from their first bytes on.
        """
        if self.budget <= 0:
            return
        with self._lock:
            self._flow(flow).acknowledging = True

    def emitted(self, flow: str, key: str, last_offset: int, nbytes: int) -> None:
        """Record a batch of partition ``key`` emitted through ``last_offset``."""
        if self.budget <= 0:
            return
        with self._lock:
            state = self._flow(flow)
            if not state.acknowledging:  # nothing here would ever release it
                return
            account = state.accounts.get(key)
            if account is None:
                account = state.accounts[key] = _Account()
            if not account.counted:
                return
            if not account.in_flight:
                account.since = time.monotonic()
            account.pending.append((last_offset, nbytes))
            account.in_flight += nbytes
            state.in_flight += nbytes

    def acknowledged(self, flow: str, key: str, sink: str, through_offset: int) -> None:
        """Sink ``sink`` staged partition ``key`` through ``through_offset``.

        A batch is released once every sink of this process that acknowledges the
        partition (and did so within ``release_after``) staged through its last offset.
        """
        if self.budget <= 0:
            return
        now = time.monotonic()
        with self._lock:
            state = self._flow(flow)
            account = state.accounts.get(key)
            if account is None:
                account = state.accounts[key] = _Account()
            previous = account.acknowledged.get(sink)
            offset = through_offset if previous is None else max(previous[0], through_offset)
            account.acknowledged[sink] = (offset, now)
            account.since = now
            account.counted = True
            for name, (_, at) in list(account.acknowledged.items()):
                if name != sink and now - at >= self.release_after:
                    del account.acknowledged[name]  # a sink that no longer receives it
            through = min(o for o, _ in account.acknowledged.values())
            pending = account.pending
            while pending and pending[0][0] <= through:
                nbytes = pending.popleft()[1]
                account.in_flight -= nbytes
                state.in_flight -= nbytes

    def in_flight(self, flow: str, key: str | None = None) -> int:
        """Bytes of ``flow`` (or of its partition ``key``) emitted and not yet staged."""
        with self._lock:
            state = self._flows.get(flow)
            if state is None:
                return 0
            if key is None:
                return state.in_flight
            account = state.accounts.get(key)
            return account.in_flight if account is not None else 0

    def admit(self, flow: str, key: str) -> datetime | None:
        """``None`` when partition ``key`` may read now, else when to ask again.

        A partition waits while its flow has more than the budget in flight and a sink
        of this process acknowledges the flow. A partition whose bytes saw no
        acknowledgement for ``release_after`` seconds is released: they stop counting.
        """
        if self.budget <= 0:
            return None
        with self._lock:
            state = self._flows.get(flow)
            if state is None or not state.acknowledging or state.in_flight < self.budget:
                if state is not None:
                    state.held = False
                return None
            now = time.monotonic()
            for name, account in state.accounts.items():
                if account.in_flight and now - account.since >= self.release_after:
                    self._release(flow, name, state, account)
            if state.in_flight < self.budget:
                state.held = False
                return None
            self.waits += 1
            if not state.held:
                state.held = True
                logger.debug(
                    "admission: %s waits with %d bytes not yet staged (budget %d)",
                    flow,
                    state.in_flight,
                    self.budget,
                )
        return datetime.now(UTC) + RETRY_AFTER

    def _release(self, flow: str, key: str, state: _Flow, account: _Account) -> None:
        self.releases += 1
        logger.info(
            "admission: %s `%s` had %d bytes unacknowledged for %.0f s; released (a sink "
            "in another process, one that does not acknowledge, or rows filtered away)",
            flow,
            key,
            account.in_flight,
            self.release_after,
        )
        state.in_flight -= account.in_flight
        account.pending.clear()
        account.in_flight = 0
        account.acknowledged.clear()
        account.counted = False

    def forget(self, flow: str) -> None:
        """Drop ``flow``'s accounts (a run ended)."""
        with self._lock:
            self._flows.pop(flow, None)


_ledger_lock = threading.Lock()
_ledger: tuple[int, AdmissionLedger] | None = None


def ledger() -> AdmissionLedger:
    """This process's ledger, its budget read from the environment on first use."""
    global _ledger  # noqa: PLW0603 - one ledger per process
    with _ledger_lock:
        if _ledger is None or _ledger[0] != os.getpid():
            _ledger = (os.getpid(), AdmissionLedger(admission_budget()))
        return _ledger[1]
