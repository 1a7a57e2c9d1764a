"""Run the flow's process under the entry point, and end as it ends.

The entry point stays the pod's main process (PID 1 in a container, where a Python
process without handlers ignores ``SIGTERM``): it starts the flow's process, ``python -m
thalweg_bytewax.cluster.runner`` (``bytewax.run`` with the cluster's readiness), as a
child, passes ``SIGTERM`` and ``SIGINT`` on to it, and exits with its exit code. When a
peer dies, Bytewax's communication threads fail in every other process, which exit
non-zero: the entry point exits non-zero too, Kubernetes restarts the pod, and every
process resumes from the last epoch committed to the recovery store.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import FrameType

from thalweg_bytewax.cluster.topology import Topology
from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.flows import BUNDLED

__all__ = ["cluster_argv", "run_supervised"]

log = logging.getLogger(__name__)


def cluster_argv(
    target: str,
    topology: Topology,
    *,
    recovery: Path | None,
    snapshot_interval: timedelta | Unset = UNSET,
    backup_interval: timedelta | Unset = UNSET,
    runner_args: list[str],
    snapshot_interval_s: float | Unset = UNSET,
    backup_interval_s: float | Unset = UNSET,
) -> list[str]:
    """The command line of this process of the cluster.

    Args:
        target: A bundled flow's name (``orders``, ``pipeline``) or ``MODULE[:FLOW]``.
        topology: This process's id and the cluster's addresses.
        recovery: The recovery directory, or ``None`` to run without recovery.
        snapshot_interval: Time between snapshots (``-s``, in seconds), with recovery;
            required.
        backup_interval: How long old snapshots are kept (``-b``, in seconds), with
            recovery; required.
        runner_args: More options of ``bytewax.run``'s command line (``-w 2``).
        snapshot_interval_s: Deprecated: ``snapshot_interval`` in seconds.
        backup_interval_s: Deprecated: ``backup_interval`` in seconds.

    Raises:
        ConfigError: When an interval is missing, no ``timedelta``, negative or given
            under both names.
    """
    snapshot = duration_keyword(
        "cluster_argv",
        "snapshot_interval",
        snapshot_interval,
        "snapshot_interval_s",
        snapshot_interval_s,
        zero=True,
    )
    backup = duration_keyword(
        "cluster_argv",
        "backup_interval",
        backup_interval,
        "backup_interval_s",
        backup_interval_s,
        zero=True,
    )
    argv = [sys.executable, "-m", "thalweg_bytewax.cluster.runner", *topology.runner_args()]
    if recovery is not None:
        argv += ["-r", str(recovery), "-s", f"{snapshot:g}"]
        argv += ["-b", f"{backup:g}"]
    return [*argv, *runner_args, BUNDLED.get(target, target)]


def run_supervised(argv: list[str], *, process_id: int) -> int:
    """Run ``argv`` as a child, pass ``SIGTERM``/``SIGINT`` on, return its exit code.

    Args:
        argv: The flow process's command line.
        process_id: This process's id, for the log line on failure.

    Returns:
        The child's exit code; ``128 + N`` when signal ``N`` ended it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    child = subprocess.Popen(argv)  # noqa: S603 - our own interpreter and runner

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if code < 0:
        code = 128 - code
    if code != 0:
        sys.stderr.write(
            f"thalweg cluster: process {process_id} ended with exit code {code}; when a "
            "peer left the cluster every process ends like this, and restarted "
            "together they resume from the last committed epoch\n"
        )
        sys.stderr.flush()
    return code
