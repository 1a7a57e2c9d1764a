"""Build-time gates: refuse a dataflow whose topology loses data by construction.

**The second-sink gate** (reference ADR-0057). Once a Kafka source's position is
committed, the broker moves on and cannot say what a downstream sink missed; from then
on the coverage store is the only record of it, and the raw lane the only place to
replay it from (``thalweg recover``). So a flow that writes one such source to two or
more sinks must also write it, untouched, to a raw lane. :func:`check_second_sink`
walks a ``Dataflow``, finds each input whose source declares ``needs_raw_lane``
(``KafkaSource``; Bytewax's own Kafka source too) and the fixed-partitioned sinks
(table, lane and topic sinks) downstream of it, and refuses the flow when two or more
of them hang off one source and none is a raw lane: a sink that declares
``can_be_raw_lane`` (``ParquetSink``) fed straight from the source's stream.

Bytewax has no build hook, so the gate runs where it is called: the bundled flows call
it at the end of ``build_flow``, and ``thalweg check MODULE[:FLOW]`` runs it on any flow
before it is deployed. ``allow_without_raw_lane=True`` is the explicit, unsafe opt-out.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from bytewax.dataflow import Dataflow, MultiPort, Operator, SinglePort
from bytewax.outputs import FixedPartitionedSink

from thalweg_bytewax.errors import ConfigError

__all__ = ["UnguardedSource", "check_second_sink", "find_unguarded_sources"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UnguardedSource:
    """An input feeding two or more sinks without a raw lane.

    Attributes:
        step_id: The input step, e.g. ``"orders.kafka_in"``.
        sinks: The output steps of the sinks it feeds.
    """

    step_id: str
    sinks: tuple[str, ...]


def _leaves(step: Operator) -> Iterator[Operator]:
    if not step.substeps:
        yield step
        return
    for sub in step.substeps:
        yield from _leaves(sub)


def _streams(step: Operator, names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        port = getattr(step, name)
        if isinstance(port, SinglePort):
            out.append(port.stream_id)
        elif isinstance(port, MultiPort):
            out.extend(port.stream_ids.values())
    return out


def _needs_raw_lane(source: object) -> bool:
    if getattr(source, "needs_raw_lane", False) is True:
        return True
    return type(source).__module__.startswith("bytewax.connectors.kafka")


def find_unguarded_sources(flow: Dataflow) -> list[UnguardedSource]:
    """The inputs of ``flow`` that feed two or more sinks and no raw lane.

    Args:
        flow: The dataflow, fully built.

    Returns:
        One entry per such input, in step order; empty when the flow passes the gate.
    """
    leaves = [leaf for step in flow.substeps for leaf in _leaves(step)]
    readers: dict[str, list[Operator]] = {}
    for leaf in leaves:
        for stream in _streams(leaf, leaf.ups_names):
            readers.setdefault(stream, []).append(leaf)
    found: list[UnguardedSource] = []
    for leaf in leaves:
        if not _needs_raw_lane(getattr(leaf, "source", None)):
            continue
        direct = set(_streams(leaf, leaf.dwn_names))
        sinks: list[str] = []
        raw_lane = False
        seen: set[str] = set()
        todo = deque(direct)
        while todo:
            stream = todo.popleft()
            if stream in seen:
                continue
            seen.add(stream)
            for reader in readers.get(stream, []):
                sink = getattr(reader, "sink", None)
                if isinstance(sink, FixedPartitionedSink):
                    sinks.append(reader.step_id)
                    ups = set(_streams(reader, reader.ups_names))
                    if getattr(sink, "can_be_raw_lane", False) is True and ups <= direct:
                        raw_lane = True
                todo.extend(_streams(reader, reader.dwn_names))
        if len(sinks) >= 2 and not raw_lane:  # noqa: PLR2004 - the second sink
            found.append(UnguardedSource(leaf.step_id, tuple(sorted(set(sinks)))))
    return found


def check_second_sink(flow: Dataflow, *, allow_without_raw_lane: bool = False) -> None:
    """Refuse ``flow`` when a source feeds two or more sinks without a raw lane.

    Args:
        flow: The dataflow, fully built (call this after the last ``op.output``).
        allow_without_raw_lane: Skip the refusal (logged as a warning). Unsafe: a sink
            that misses records after the source moved on has lost them for good, and
            nothing can replay them.

    Raises:
        ConfigError: Naming each such input, its sinks, and how to add the lane.
    """
    found = find_unguarded_sources(flow)
    if not found:
        return
    what = "; ".join(
        f"input `{u.step_id}` feeds {len(u.sinks)} sinks ({', '.join(f'`{s}`' for s in u.sinks)})"
        for u in found
    )
    if allow_without_raw_lane:
        logger.warning(
            "flow %s runs without a raw lane (allow_without_raw_lane=True): %s; records a "
            "sink misses cannot be recovered",
            flow.flow_id,
            what,
        )
        return
    msg = (
        f"flow `{flow.flow_id}`: {what} and no raw lane; expected a raw lane beside a second "
        "sink, because once the source moves on only the raw lane can replay what a sink "
        "missed. Write the source's stream untouched to a lane, e.g. "
        "`op.output(\"raw_lane\", raw, ParquetSink(\"lake/raw\", coverage_store=\"lake/raw\"))` "
        "right after `op.input`, or pass `allow_without_raw_lane=True` (unsafe: missed "
        "records are lost)"
    )
    raise ConfigError(msg)
