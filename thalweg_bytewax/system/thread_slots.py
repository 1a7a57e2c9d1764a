"""Values kept per OS thread, across the Python thread states a Bytewax worker is given.

Bytewax 0.21.1 runs the workers of a cluster (``-i/-a``, as ``thalweg cluster`` starts
them) on threads its Rust runtime starts, and each activation of a Python step there
takes the GIL with a Python thread state of its own, dropped when the activation
returns. :class:`threading.local` lives in that thread state, so on such a worker it is
empty again at every batch: a per-thread cache is rebuilt each batch, and a per-thread
record registered somewhere else is registered again each batch and never dropped.
A :class:`ThreadSlots` is keyed by :func:`threading.get_ident`, the OS thread's
identity, which stays the same for the worker's life.

A slot lives as long as its :class:`ThreadSlots` (a thread that ends does not take its
slot with it; a later thread given the same identity finds it, as the only thread using
it). A forked child starts with no slot: what the parent's threads held (a connection's
cursor) is not the child's.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ThreadSlots"]

T = TypeVar("T")

_ALL: weakref.WeakSet[ThreadSlots[object]] = weakref.WeakSet()


class ThreadSlots(Generic[T]):
    """One value per OS thread, made by ``factory`` on the thread's first :meth:`get`.

    Args:
        factory: Makes the calling thread's value; called outside any lock, once per
            thread (only the thread itself creates its slot).
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._slots: dict[int, T] = {}
        _ALL.add(self)  # type: ignore[arg-type]

    def get(self) -> T:
        """The calling thread's value, made on its first call."""
        ident = threading.get_ident()
        try:
            return self._slots[ident]
        except KeyError:
            value = self._factory()
            with self._lock:
                self._slots[ident] = value
            return value

    def put(self, value: T) -> None:
        """Replace the calling thread's value."""
        with self._lock:
            self._slots[threading.get_ident()] = value

    def values(self) -> list[T]:
        """Every thread's value, as a list (a copy: the threads go on)."""
        with self._lock:
            return list(self._slots.values())

    def __len__(self) -> int:
        return len(self._slots)

    def forget_all(self) -> None:
        """Drop every thread's value (a forked child does, before its first :meth:`get`)."""
        self._lock = threading.Lock()  # the parent's may have been held at the fork
        self._slots = {}


def _after_fork_in_child() -> None:
    for slots in list(_ALL):
        slots.forget_all()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
