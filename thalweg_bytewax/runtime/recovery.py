"""Check a Bytewax recovery directory against the flow about to resume from it.

Bytewax routes every piece of resumed state to the partition that owns its key. When a
flow changed so that a partition with stored state is no longer listed — a topic
removed from a ``KafkaSource``, a file removed from a file source — Bytewax 0.21.1 stops
before any connector code runs, with a routing error that names neither the step nor a
remedy (``Key StateKey("orders:0") is not in this worker's routing map``).
:func:`check_recovery_store` finds that case up front and says what happened and what to
do; ``thalweg recovery check MODULE[:FLOW] DIR`` runs it from the command line.

The store is read, never written: each ``part-*.sqlite3`` file is opened read-only and
only the ``snaps`` table is consulted (the newest snapshot of each step and key; a NULL
snapshot means Bytewax discarded that key's state).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bytewax.dataflow import Dataflow, Operator
from bytewax.inputs import FixedPartitionedSource
from bytewax.outputs import FixedPartitionedSink

from thalweg_bytewax.errors import ConfigError

__all__ = ["OrphanedState", "check_recovery_store", "find_orphaned_state", "stored_state_keys"]

logger = logging.getLogger(__name__)

# Keys quoted in an error before the rest are only counted: a topic of 500 partitions
# must not make a 500-line message.
_MAX_KEYS_SHOWN = 8

_NEWEST_SNAPSHOTS = """
    SELECT step_id, state_key, ser_change IS NOT NULL
    FROM snaps AS s
    WHERE snap_epoch = (
        SELECT max(snap_epoch) FROM snaps AS t
        WHERE t.step_id = s.step_id AND t.state_key = s.state_key
    )
"""


@dataclass(frozen=True, slots=True)
class OrphanedState:
    """State stored for partitions that a step of the flow no longer lists.

    Attributes:
        step_id: The Bytewax step holding the state, e.g. ``"orders.kafka_in"``.
        orphaned: Stored partition keys the step does not list any more.
        listed: The partition keys the step lists now.
    """

    step_id: str
    orphaned: tuple[str, ...]
    listed: tuple[str, ...]

    def per_file_ipc_state(self) -> bool:
        """Whether the orphaned keys are the per-file keys of an earlier ``ArrowIPCSource``.

        That source once read one partition per file (``"<file>.arrow:0"``); it now reads
        one per directory (``"<directory>:0"``), so a store it wrote names files.
        """
        return all(k.endswith((".arrow:0", ".arrows:0")) for k in self.orphaned) and all(
            not k.endswith((".arrow:0", ".arrows:0")) for k in self.listed
        )


def stored_state_keys(directory: str | Path) -> dict[str, set[str]]:
    """The partition keys with live state in a recovery directory, per step id.

    Args:
        directory: A directory made by ``python -m bytewax.recovery DIR N``.

    Returns:
        For each step id, the keys whose newest snapshot holds state.

    Raises:
        ConfigError: When ``directory`` does not exist, holds no recovery partition, or a
            partition cannot be read as a Bytewax recovery store.
    """
    root = Path(directory)
    parts = sorted(root.glob("part-*.sqlite3")) if root.is_dir() else []
    if not parts:
        msg = (
            f"recovery store `{root}`: expected a directory of `part-*.sqlite3` files; "
            "found none (create one with `python -m bytewax.recovery DIR N`)"
        )
        raise ConfigError(msg)
    keys: dict[str, set[str]] = {}
    for part in parts:
        for step_id, key, alive in _newest_snapshots(part):
            if alive:
                keys.setdefault(step_id, set()).add(key)
    return keys


def find_orphaned_state(flow: Dataflow, directory: str | Path) -> list[OrphanedState]:
    """Steps of ``flow`` whose stored state names partitions they no longer list.

    Only fixed-partitioned inputs and outputs are checked: theirs is the state Bytewax
    routes by partition key. Listing partitions may contact the source's system (a
    ``KafkaSource`` asks the brokers for its topics' partitions).

    Args:
        flow: The dataflow about to resume.
        directory: Its recovery directory.

    Returns:
        One entry per step with orphaned state, in step order; empty when the flow can
        resume from ``directory``.
    """
    stored = stored_state_keys(directory)
    found: list[OrphanedState] = []
    for step_id, listed in _partitioned_steps(flow):
        orphaned = stored.get(step_id, set()) - set(listed)
        if orphaned:
            found.append(OrphanedState(step_id, tuple(sorted(orphaned)), tuple(sorted(listed))))
    return found


def check_recovery_store(flow: Dataflow, directory: str | Path) -> None:
    """Refuse to resume ``flow`` from ``directory`` when Bytewax would fail to route it.

    Args:
        flow: The dataflow about to resume.
        directory: Its recovery directory.

    Raises:
        ConfigError: Naming each step and the partitions whose state has nowhere to go,
            with what to do about it.
    """
    found = find_orphaned_state(flow, directory)
    if not found:
        logger.info("recovery store %s matches the partitions of flow %s", directory, flow.flow_id)
        return
    ipc = [o for o in found if o.per_file_ipc_state() and o.step_id in _ipc_steps(flow)]
    if ipc:
        steps = "; ".join(
            f"step `{o.step_id}` holds state for files ({_quoted(o.orphaned)}) but reads "
            f"directories ({_quoted(o.listed) if o.listed else 'none'})"
            for o in ipc
        )
        msg = (
            f"recovery store `{directory}`: {steps}. `ArrowIPCSource` now reads one partition "
            "per directory (a source partition, its files in offset order) instead of one per "
            "file, and state kept per file cannot place that read. Move the flow to a fresh "
            "recovery directory (`python -m bytewax.recovery NEW_DIR N`): the source reads "
            "the directory from its start, and an epoch sink downstream (ParquetSink, "
            "ArrowIPCSink, IcebergSink, PostgresSink, KafkaSink) skips the rows it already "
            "holds; a sink that cannot skip replays receives them again"
        )
        raise ConfigError(msg)
    steps = "; ".join(
        f"step `{o.step_id}` holds state for {_quoted(o.orphaned)} but lists "
        f"{_quoted(o.listed) if o.listed else 'no partition'}"
        for o in found
    )
    msg = (
        f"recovery store `{directory}`: {steps}. A topic (or file) was removed from the "
        "source since the state was written, and Bytewax cannot resume state that has no "
        "partition to go to; add it back to the source until the flow is moved to a fresh "
        "recovery directory (`python -m bytewax.recovery NEW_DIR N`; partitions without "
        "state then start at the source's starting position)"
    )
    raise ConfigError(msg)


def _newest_snapshots(part: Path) -> Iterator[tuple[str, str, bool]]:
    try:
        # Read-only, so a check never creates or changes a store (mode=ro fails on a
        # missing file instead of creating it).
        with sqlite3.connect(f"{part.resolve().as_uri()}?mode=ro", uri=True) as conn:
            rows = conn.execute(_NEWEST_SNAPSHOTS).fetchall()
    except sqlite3.Error as exc:
        msg = (
            f"recovery store `{part}`: cannot read it as a Bytewax recovery partition "
            f"({type(exc).__name__}); expected a file made by `python -m bytewax.recovery`"
        )
        raise ConfigError(msg) from exc
    for step_id, key, alive in rows:
        yield str(step_id), str(key), bool(alive)


def _ipc_steps(flow: Dataflow) -> set[str]:
    """The step ids of ``flow``'s ``ArrowIPCSource`` inputs (by class name: no connector import)."""
    return {
        step_id for step_id, source in _sources(flow) if type(source).__name__ == "ArrowIPCSource"
    }


def _sources(flow: Dataflow) -> Iterator[tuple[str, object]]:
    stack: list[Operator] = list(reversed(flow.substeps))
    while stack:
        step = stack.pop()
        source = getattr(step, "source", None)
        if source is not None:
            yield step.step_id, source
        else:
            stack.extend(reversed(step.substeps))


def _partitioned_steps(flow: Dataflow) -> Iterator[tuple[str, list[str]]]:
    """Each fixed-partitioned input and output of ``flow``, with the keys it lists."""
    stack: list[Operator] = list(reversed(flow.substeps))
    while stack:
        step = stack.pop()
        source = getattr(step, "source", None)
        sink = getattr(step, "sink", None)
        if isinstance(source, FixedPartitionedSource):
            yield step.step_id, list(source.list_parts())
        elif isinstance(sink, FixedPartitionedSink):
            yield step.step_id, list(sink.list_parts())
        else:
            stack.extend(reversed(step.substeps))


def _quoted(keys: tuple[str, ...]) -> str:
    shown = ", ".join(f"`{k}`" for k in keys[:_MAX_KEYS_SHOWN])
    more = len(keys) - _MAX_KEYS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
