"""``thalweg cluster FLOW``: this pod's process of a Bytewax cluster (docs/deploy.md).

The process id comes from the StatefulSet pod's ordinal, the ``-a`` list from the
headless service; the entry point waits until every peer resolves, creates the recovery
partitions once (process 0), then runs the flow and exits with its exit code, so a pod
whose peer died restarts and the whole cluster resumes from the last committed epoch.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from thalweg_bytewax.cli._subcommand import add_subcommand
from thalweg_bytewax.cluster import (
    cluster_argv,
    ensure_recovery_partitions,
    run_supervised,
    topology_from_env,
    wait_for_peers,
)
from thalweg_bytewax.cluster.topology import setting_number

__all__ = ["add_commands"]

log = logging.getLogger(__name__)

_N = TypeVar("_N", int, float)


def _cluster(args: argparse.Namespace) -> int:
    """Run this pod's process of a Bytewax cluster (StatefulSet ordinal = process id).

    Run a flow as one process of a Bytewax cluster: the process id from the StatefulSet pod's
    ordinal (hostname NAME-N, or THALWEG_PROCESS_ID), the addresses NAME-i.SERVICE:PORT from
    THALWEG_CLUSTER_SIZE, THALWEG_CLUSTER_SERVICE and THALWEG_CLUSTER_PORT (or
    THALWEG_CLUSTER_ADDRESSES). Waits until every peer resolves, creates the recovery partitions
    once (process 0), runs the flow (its /ready false until the cluster formed, and again once a
    peer is lost), and exits with its exit code: a peer's death ends every process non-zero, so the
    pods restart and resume together from the last committed epoch.
    """
    topology = topology_from_env(os.environ, socket.gethostname())
    log.info("process %d of %d: %s", topology.process_id, topology.size, topology.addresses)
    peer_timeout = _seconds(args.peer_timeout, "THALWEG_PEER_TIMEOUT_S", 300.0)
    wait_for_peers(topology.hosts, timeout=timedelta(seconds=peer_timeout))
    recovery_dir = args.recovery or os.environ.get("THALWEG_RECOVERY_DIR")
    recovery = Path(recovery_dir) if recovery_dir else None
    if recovery is not None:
        count = _option_or_env(args.recovery_partitions, "THALWEG_RECOVERY_PARTITIONS", int, 0)
        ensure_recovery_partitions(recovery, count or topology.size, process_id=topology.process_id)
    argv = cluster_argv(
        args.flow,
        topology,
        recovery=recovery,
        snapshot_interval=timedelta(
            seconds=_seconds(args.snapshot_interval, "THALWEG_SNAPSHOT_INTERVAL_S", 30.0)
        ),
        backup_interval=timedelta(
            seconds=_seconds(args.backup_interval, "THALWEG_BACKUP_INTERVAL_S", 0.0)
        ),
        runner_args=list(args.runner_args),
    )
    return run_supervised(argv, process_id=topology.process_id)


def _seconds(value: float | None, name: str, default: float) -> float:
    """Seconds: an option's value, else its variable's, else ``default``; a clear error if bad."""
    return _option_or_env(value, name, float, default, what="a number of seconds", unit="seconds")


def _option_or_env(
    value: _N | None,
    name: str,
    parse: Callable[[str], _N],
    default: _N,
    *,
    what: str = "an integer",
    unit: str = "",
) -> _N:
    """An option's value, else its variable's, else ``default``; 0 or more, or a clear error."""
    raw = str(value) if value is not None else os.environ.get(name)
    number = setting_number(name, raw, parse, minimum=0, what=what, unit=unit)
    return default if number is None else number


def add_commands(sub: Any) -> None:
    """Add ``cluster`` to the CLI's subparsers."""
    cluster = add_subcommand(sub, "cluster", _cluster)
    cluster.add_argument(
        "flow", metavar="FLOW", help="a bundled flow (orders, pipeline) or MODULE[:FLOW]"
    )
    cluster.add_argument(
        "-r",
        "--recovery",
        metavar="DIR",
        help="recovery directory (env THALWEG_RECOVERY_DIR); none: run without recovery",
    )
    cluster.add_argument(
        "--recovery-partitions",
        type=int,
        metavar="N",
        help="partitions of a new recovery store (env THALWEG_RECOVERY_PARTITIONS; "
        "default: the cluster's size)",
    )
    cluster.add_argument(
        "-s",
        "--snapshot-interval",
        type=float,
        metavar="SECONDS",
        help="seconds between snapshots (env THALWEG_SNAPSHOT_INTERVAL_S; default 30)",
    )
    cluster.add_argument(
        "-b",
        "--backup-interval",
        type=float,
        metavar="SECONDS",
        help="seconds old snapshots are kept (env THALWEG_BACKUP_INTERVAL_S; default 0)",
    )
    cluster.add_argument(
        "--peer-timeout",
        type=float,
        metavar="SECONDS",
        help="how long to wait for every peer's name to resolve "
        "(env THALWEG_PEER_TIMEOUT_S; default 300)",
    )
    cluster.add_argument(
        "runner_args",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="more options for python -m bytewax.run (e.g. -w 2)",
    )
