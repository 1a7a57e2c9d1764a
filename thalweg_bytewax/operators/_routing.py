"""Keyed state on the worker that reads each source partition.

``twg.dedup`` and ``twg.validate`` key their state by the partition's routing key
(:func:`~thalweg_bytewax.runtime.placement.routing_key`), which Bytewax runs on the worker
that reads the partition; the stream around them keeps the partition key.

A step resuming a recovery store that holds its state under partition keys (written by
a release before routing keys) keeps the partition keys for that store
(:mod:`~thalweg_bytewax.runtime.state_keys`): its state is found, and only its batches
may cross to another worker. At several processes such a store stops the run until it
is migrated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import bytewax.operators as op
from bytewax.operators import KeyedStream, StatefulLogic

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.placement import (
    cluster_processes,
    partition_of_routing_key,
    routing_key,
)
from thalweg_bytewax.runtime.state_keys import (
    KeyStyle,
    recovery_directory,
    run_generation,
    stored_key_style,
)

__all__ = ["routed_step_ids", "stateful_on_reading_worker"]

logger = logging.getLogger(__name__)

V = TypeVar("V")
W = TypeVar("W")

_ROUTED_STEPS: set[str] = set()
"""Full step ids of the routed steps of every flow built in this process."""


def routed_step_ids() -> frozenset[str]:
    """The full step ids (as a recovery store names them) of every routed step built here."""
    return frozenset(_ROUTED_STEPS)


class _Keys:
    """Which key one routed step keeps its state under in this run, decided once a run."""

    def __init__(self) -> None:
        self.step_id = ""
        self._lock = threading.Lock()
        self._generation = -1
        self._legacy = False
        self._warned = False

    def legacy(self) -> bool:
        """Whether this run keeps the step on partition keys (its store holds them)."""
        if self._generation == run_generation():
            return self._legacy
        with self._lock:
            generation = run_generation()
            if self._generation != generation:
                self._legacy = self._decide()
                self._generation = generation
            return self._legacy

    def _decide(self) -> bool:
        directory = recovery_directory()
        if directory is None:
            return False
        style = stored_key_style(directory, self.step_id)
        if style is KeyStyle.MIXED:
            msg = (
                f"step {self.step_id!r}: the recovery store {directory} holds its state "
                "under both partition keys and routing keys (a key migration stopped "
                f"part-way): run `thalweg recovery migrate-keys FLOW {directory}` again "
                "while the flow is stopped, then resume"
            )
            _refuse(msg)
        processes = cluster_processes() or 1
        if style is KeyStyle.LEGACY and processes > 1:
            # Each process decides for the partitions it reads, and a process may not
            # see the recovery partitions another holds: they could disagree.
            msg = (
                f"step {self.step_id!r}: the recovery store {directory} holds its state "
                "under partition keys (written by a release before routing keys), and "
                f"this run has {processes} processes, which must all key it alike but "
                "need not all see the store: stop the flow, run `thalweg recovery "
                f"migrate-keys FLOW {directory}`, then start it at any size (or resume it "
                "at one process, any -w, which keeps the partition keys)"
            )
            _refuse(msg)
        if style is KeyStyle.LEGACY and not self._warned:
            self._warned = True
            logger.warning(
                "step %r runs on legacy routing: the recovery store %s holds its state "
                "under partition keys (written by a release before routing keys), so it "
                "keeps them and its batches may be handed to another worker; to run it on "
                "the worker reading each partition, stop the flow and run "
                "`thalweg recovery migrate-keys FLOW %s`",
                self.step_id,
                directory,
                directory,
            )
        return style is KeyStyle.LEGACY

    def route(self, kv: tuple[str, Any]) -> tuple[str, Any]:
        return (kv[0] if self.legacy() else routing_key(kv[0])), kv[1]

    def unroute(self, kv: tuple[str, Any]) -> tuple[str, Any]:
        key, value = kv[0], kv[1]
        partition = key if self.legacy() else partition_of_routing_key(key)
        crossings.arrived(partition, getattr(value, "num_rows", 1))
        return partition, value


def _refuse(msg: str) -> NoReturn:
    # Logged too: at several processes the engine reports a worker's exception as a
    # panic of its communication thread, without the message.
    logger.error("%s", msg)
    raise ConfigError(msg)


def stateful_on_reading_worker(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[Any | None], StatefulLogic[V, W, Any]],
) -> KeyedStream[W]:
    """``op.stateful(step_id, up, builder)``, its state on each key's reading worker.

    The state is kept under the routing key (the same at any worker count, so it is
    found after a resume at another), or under the partition key when the store the
    run resumes holds the step's state there; the output carries the key it came with.
    """
    keys = _Keys()
    routed: KeyedStream[V] = op.map(f"{step_id}_route", up, keys.route)
    done = op.stateful(step_id, routed, builder)
    keys.step_id = done.stream_id.removesuffix(".down")
    _ROUTED_STEPS.add(keys.step_id)
    return op.map(f"{step_id}_unroute", done, keys.unroute)
