"""Keyed state on the worker that reads each source partition.

``twg.dedup`` and ``twg.validate`` key their state by the partition's routing key
(:func:`~thalweg_bytewax.runtime.placement.routing_key`), which Bytewax runs on the worker
that reads the partition; the stream around them keeps the partition key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import bytewax.operators as op
from bytewax.operators import KeyedStream, StatefulLogic

from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.placement import partition_of_routing_key, routing_key

__all__ = ["stateful_on_reading_worker"]

V = TypeVar("V")
W = TypeVar("W")


def _to_routing_key(kv: tuple[str, Any]) -> tuple[str, Any]:
    return routing_key(kv[0]), kv[1]


def _to_partition_key(kv: tuple[str, Any]) -> tuple[str, Any]:
    key, value = kv[0], kv[1]
    partition = partition_of_routing_key(key)
    crossings.arrived(partition, getattr(value, "num_rows", 1))
    return partition, value


def stateful_on_reading_worker(
    step_id: str,
    up: KeyedStream[V],
    builder: Callable[[Any | None], StatefulLogic[V, W, Any]],
) -> KeyedStream[W]:
    """``op.stateful(step_id, up, builder)``, its state on each key's reading worker.

    The state is kept under the routing key (the same at any worker count, so it is
    found after a resume at another); the output carries the key it came with.
    """
    routed: KeyedStream[V] = op.map(f"{step_id}_route", up, _to_routing_key)
    done = op.stateful(step_id, routed, builder)
    return op.map(f"{step_id}_unroute", done, _to_partition_key)
