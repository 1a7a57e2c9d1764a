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
from datetime import timedelta
from pathlib import Path
from typing import Any

from thalweg_bytewax.cluster import (
    ClusterError,
    cluster_argv,
    ensure_recovery_partitions,
    run_supervised,
    topology_from_env,
    wait_for_peers,
)

__all__ = ["add_commands"]

log = logging.getLogger(__name__)


def _cluster(args: argparse.Namespace) -> int:
    topology = topology_from_env(os.environ, socket.gethostname())
    log.info("process %d of %d: %s", topology.process_id, topology.size, topology.addresses)
    peer_timeout = _number(args.peer_timeout, "THALWEG_PEER_TIMEOUT_S", 300.0)
    wait_for_peers(topology.hosts, timeout=timedelta(seconds=peer_timeout))
    recovery_dir = args.recovery or os.environ.get("THALWEG_RECOVERY_DIR")
    recovery = Path(recovery_dir) if recovery_dir else None
    if recovery is not None:
        count = int(_number(args.recovery_partitions, "THALWEG_RECOVERY_PARTITIONS", 0))
        ensure_recovery_partitions(recovery, count or topology.size, process_id=topology.process_id)
    argv = cluster_argv(
        args.flow,
        topology,
        recovery=recovery,
        snapshot_interval=timedelta(
            seconds=_number(args.snapshot_interval, "THALWEG_SNAPSHOT_INTERVAL_S", 30.0)
        ),
        backup_interval=timedelta(
            seconds=_number(args.backup_interval, "THALWEG_BACKUP_INTERVAL_S", 0.0)
        ),
        runner_args=list(args.runner_args),
    )
    return run_supervised(argv, process_id=topology.process_id)


def _number(value: str | float | None, name: str, default: float) -> float:
    """An option's value, else its variable's, else ``default``; a clear error if bad."""
    raw = value if value is not None else os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        number = float(raw)
    except ValueError:
        msg = f"{name}={raw!r} is not a number of seconds"
        raise ClusterError(msg) from None
    if number < 0:
        msg = f"{name}={raw!r} is negative; give 0 or more seconds"
        raise ClusterError(msg)
    return number


def add_commands(sub: Any) -> None:
    """Add ``cluster`` to the CLI's subparsers."""
    cluster = sub.add_parser(
        "cluster",
        help="run this pod's process of a Bytewax cluster (StatefulSet ordinal = process id)",
        description="Run a flow as one process of a Bytewax cluster: the process id from "
        "the StatefulSet pod's ordinal (hostname NAME-N, or THALWEG_PROCESS_ID), the "
        "addresses NAME-i.SERVICE:PORT from THALWEG_CLUSTER_SIZE, THALWEG_CLUSTER_SERVICE "
        "and THALWEG_CLUSTER_PORT (or THALWEG_CLUSTER_ADDRESSES). Waits until every peer "
        "resolves, creates the recovery partitions once (process 0), runs the flow (its "
        "/ready false until the cluster formed, and again once a peer is lost), and "
        "exits with its exit code: a peer's death ends every process non-zero, so the "
        "pods restart and resume together from the last committed epoch.",
    )
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
    cluster.set_defaults(func=_cluster)
