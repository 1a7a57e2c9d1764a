"""The health tree: every stage reports a status, a reason and the numbers behind it.

Three projections of one registry (served by :mod:`.server`):

- ``/health`` — the whole tree, each component ``ok`` / ``degraded`` / ``down`` with its
  reason and numbers; the worst status is the overall one.
- ``/ready`` — gated only by *readiness-critical* components: the source partitions
  and the primary raw lane. If a source is down or raw cannot be written, the process
  is not ready; a degraded step (a DLQ spike), a failed secondary sink or a slow
  transform shows in ``/health`` but never drops readiness.
- ``/live`` — fails only on unrecoverable in-process state (:meth:`HealthRegistry.kill`),
  never on a data-plane problem: a restart would not fix that and would loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

__all__ = ["Component", "HealthRegistry", "Status", "registry"]

Numbers = Callable[[], Mapping[str, Any]]
"""A callable returning the numbers behind a component's status (read on request)."""

_RANK = {"ok": 0, "degraded": 1, "down": 2}


class Status(StrEnum):
    """A component's state."""

    OK = "ok"
    """Operating normally."""
    DEGRADED = "degraded"
    """Working but impaired (transient errors, an elevated reject rate); display only."""
    DOWN = "down"
    """Not functioning (a source failed, a sink's commit failed)."""


class Component:
    """One stage in the health tree; its status is set by the stage's hook.

    The hooks set it per batch: status, reason and the time of the last change are one
    tuple replaced by a single attribute write (no lock on the hot path, and a reader
    never sees a status with another status's reason).

    Args:
        kind: The group it shows under (``source``, ``step``, ``sink``).
        name: Its name within the group (a partition key, a step id).
        critical: Whether it gates ``/ready``.
        numbers: Read on request for the numbers shown beside the status.
    """

    __slots__ = ("_state", "critical", "kind", "name", "numbers")

    def __init__(
        self, kind: str, name: str, *, critical: bool, numbers: Numbers | None = None
    ) -> None:
        self.kind = kind
        self.name = name
        self.critical = critical
        self.numbers = numbers
        self._state: tuple[Status, str, float] = (Status.OK, "", time.time())

    @property
    def status(self) -> Status:
        """The current status."""
        return self._state[0]

    @property
    def reason(self) -> str:
        """Why the status is what it is (empty when ``ok``)."""
        return self._state[1]

    @property
    def since(self) -> float:
        """When the status last changed (seconds since the epoch)."""
        return self._state[2]

    def set(self, status: Status, reason: str = "") -> None:
        """Set the status and its reason (a change restarts ``since``)."""
        status_was, reason_was, since = self._state
        if status is status_was and reason == reason_was:
            return
        self._state = (status, reason, time.time() if status is not status_was else since)

    def ok(self) -> None:
        """Mark the component operating normally."""
        if self._state[0] is not Status.OK:
            self.set(Status.OK)

    def degraded(self, reason: str) -> None:
        """Mark the component working but impaired, saying why."""
        self.set(Status.DEGRADED, reason)

    def down(self, reason: str) -> None:
        """Mark the component not functioning, saying why."""
        self.set(Status.DOWN, reason)

    def to_dict(self) -> dict[str, Any]:
        """The component as JSON-ready data."""
        status, reason, since = self._state  # one consistent reading
        out: dict[str, Any] = {
            "status": str(status),
            "critical": self.critical,
            "since": round(since, 3),
        }
        if reason:
            out["reason"] = reason
        if self.numbers is not None:
            try:
                out["numbers"] = dict(self.numbers())
            except Exception as exc:  # a closed client: show it, never fail the request
                out["numbers"] = {"error": type(exc).__name__}
        return out


class HealthRegistry:
    """The components of this process, by group and name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._components: dict[tuple[str, str], Component] = {}
        self._dead: str | None = None

    def register(
        self,
        kind: str,
        name: str,
        *,
        critical: bool = False,
        numbers: Numbers | None = None,
        unique: bool = False,
    ) -> Component:
        """Add a component and return it.

        A component of the same kind and name is replaced (a rebuilt partition), unless
        ``unique``: then the name gets a `` (2)``, `` (3)``… suffix (sinks of one class
        share a name).
        """
        with self._lock:
            final = name
            n = 1
            while unique and (kind, final) in self._components:
                n += 1
                final = f"{name} ({n})"
            comp = Component(kind, final, critical=critical, numbers=numbers)
            self._components[(kind, final)] = comp
        return comp

    def unregister(self, component: Component) -> None:
        """Remove a component (a cleanly finished partition), if it is still registered."""
        with self._lock:
            key = (component.kind, component.name)
            if self._components.get(key) is component:
                del self._components[key]

    def components(self) -> list[Component]:
        """Every registered component."""
        with self._lock:
            return list(self._components.values())

    def clear(self) -> None:
        """Forget every component and the liveness failure (between runs or tests)."""
        with self._lock:
            self._components.clear()
            self._dead = None

    def kill(self, reason: str) -> None:
        """Record unrecoverable in-process state: ``/live`` fails from now on."""
        self._dead = reason

    def status(self) -> Status:
        """The worst status of every component (``ok`` when none is registered)."""
        worst = max((_RANK[c.status] for c in self.components()), default=0)
        return Status(next(k for k, v in _RANK.items() if v == worst))

    def ready(self) -> tuple[bool, list[str]]:
        """Whether no readiness-critical component is down, and the reasons if not."""
        down = [
            f"{c.kind} `{c.name}`: {c.reason}"
            for c in self.components()
            if c.critical and c.status is Status.DOWN
        ]
        return not down, down

    def live(self) -> tuple[bool, str]:
        """Whether the process is alive, and why not."""
        return self._dead is None, self._dead or ""

    def tree(self) -> dict[str, Any]:
        """The whole tree as JSON-ready data: overall status, readiness and components."""
        groups: dict[str, dict[str, Any]] = {}
        for c in sorted(self.components(), key=lambda c: (c.kind, c.name)):
            groups.setdefault(c.kind, {})[c.name] = c.to_dict()
        ready, why = self.ready()
        out: dict[str, Any] = {"status": str(self.status()), "ready": ready}
        if why:
            out["not_ready"] = why
        out["components"] = groups
        return out


registry = HealthRegistry()
"""The process's health registry (hooks register into it; the server reads it)."""
