"""When a source partition that just emitted records asks to be read again.

Bytewax 0.21.1 lets a partition emit into epoch ``e`` only once every output of the
dataflow has finished ``e - 1`` (its backpressure). While a partition waits for that,
its input operator is not told when to look again: it re-activates itself at the
partition's ``next_awake``, and a partition that returned ``None`` (what a source
returns after a batch with records, to be read again at once) is due at once. So the
worker steps without ever parking until the slowest output of the whole cluster is
done with the epoch: in a cluster of several processes, every process whose sinks
finished first spins a core in Timely's scheduler while another commits its epoch
(measured on the orders flow at two processes: the engine's own code went from 0.03 %
of the CPU at one process to 11 %, all of it that loop; docs/scaling.md).

:func:`after_batch` is the ``next_awake`` a partition returns after a batch with
records instead: one millisecond later. A worker with nothing else due then parks
(Timely wakes it for a message or at that time) instead of spinning. The records of a
batch take the worker longer than that to decode, validate and stage, so a partition
that is not held back is read as soon as before.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["AFTER_BATCH", "after_batch"]

AFTER_BATCH = timedelta(milliseconds=1)
"""How long after a batch with records its partition asks to be read again."""


def after_batch(now: datetime) -> datetime:
    """The ``next_awake`` of a partition that emitted records at ``now``.

    Args:
        now: When the batch was read (timezone-aware, as Bytewax compares it in UTC).

    Returns:
        ``now`` plus :data:`AFTER_BATCH`.
    """
    return now + AFTER_BATCH
