"""The dependency-free switch the connectors and operators check before any hook.

Connectors and operators import only this module, so a flow without the
``observability`` extra never imports OpenTelemetry: while observability is off (the
default) each ``observe_*`` call is one flag check returning None. It turns on with
:func:`thalweg_bytewax.observability.observe`, or when ``THALWEG_HTTP_PORT`` is set or
a configuration armed OTLP export (:func:`arm`) at the moment a source or sink
partition is built. The switch itself (on or off, the armed export) is in
:mod:`._switch`; this module answers its names too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from thalweg_bytewax import _deps

from ._switch import HTTP_HOST_ENV, HTTP_PORT_ENV, arm, is_armed, is_on, set_on, take_armed

if TYPE_CHECKING:
    import pyarrow as pa

    from .meters import SinkCounters, SourceCounters
    from .observers import SinkObserver, SourceObserver, StepBatch

__all__ = [
    "HTTP_HOST_ENV",
    "HTTP_PORT_ENV",
    "arm",
    "is_on",
    "observe_sink_partition",
    "observe_source_partition",
    "observe_rule_warnings",
    "observe_step",
    "set_on",
    "take_armed",
]


def _on_or_env() -> bool:
    if is_on():
        return True
    if not is_armed() and not os.environ.get(HTTP_PORT_ENV):
        return False
    _deps.require("opentelemetry.sdk", extra="observability")
    from .hooks import observe  # noqa: PLC0415 - OpenTelemetry only once it is asked for

    observe()
    return True


def observe_source_partition(
    step_id: str,
    topic: str,
    partition: int,
    stats: SourceCounters,
    *,
    headers_column: str,
    watermarks: Callable[[], tuple[int, int]],
) -> SourceObserver | None:
    """Register a source partition, or return None while observability is off.

    Args:
        step_id: The source's id in metrics.
        topic: Its topic.
        partition: Its partition.
        stats: Its plain counters (``KafkaSourceStats``).
        headers_column: The name of the RawBatch headers column (trace context).
        watermarks: Returns the partition's cached ``(low, high)`` watermarks.
    """
    if not _on_or_env():
        return None
    from .observers import SourceObserver  # noqa: PLC0415 - see _on_or_env

    return SourceObserver(
        step_id, topic, partition, stats, headers_column=headers_column, watermarks=watermarks
    )


def observe_sink_partition(
    step_id: str,
    name: str,
    stats: SinkCounters,
    committed: Callable[[], Mapping[str, int]],
    *,
    critical: bool,
) -> SinkObserver | None:
    """Register a sink partition, or return None while observability is off.

    Args:
        step_id: The sink's id in metrics (its partitions share it).
        name: Its name in the health tree (unique per partition).
        stats: Its plain counters (``EpochSinkStats``).
        committed: Per source partition key, the next offset after the last commit.
        critical: Whether its failure drops readiness (the primary raw lane).
    """
    if not _on_or_env():
        return None
    from .observers import SinkObserver  # noqa: PLC0415 - see _on_or_env

    return SinkObserver(step_id, name, stats, committed, critical=critical)


def observe_step(name: str, step_id: str, batch: pa.RecordBatch) -> StepBatch | None:
    """Start observing one batch through a step, or return None while off.

    Per batch, so it checks the flag only (the environment is read when partitions
    are built).

    Args:
        name: The kind of work (``decode``, ``validate``), the span's name prefix.
        step_id: The step's id.
        batch: The input batch.
    """
    if not is_on():
        return None
    from .observers import StepBatch  # noqa: PLC0415 - see _on_or_env

    return StepBatch(name, step_id, batch)


def observe_rule_warnings(step_id: str, failed: Mapping[str, int]) -> None:
    """Count the records reporting rules failed in one batch, by rule id (off: nothing).

    Args:
        step_id: The ``validate`` step.
        failed: Records failed per rule id of severity ``warning`` or ``info``.
    """
    if not failed or not is_on():
        return
    from .meters import metrics  # noqa: PLC0415 - see _on_or_env

    m = metrics()
    if m is not None:
        m.rule_warnings(step_id, failed)
