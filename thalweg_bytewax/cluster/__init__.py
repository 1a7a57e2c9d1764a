"""A thalweg flow as a Bytewax cluster of pods: one process per pod of a StatefulSet.

* :mod:`~thalweg_bytewax.cluster.topology` — the process id from the pod's ordinal and
  the ``-a`` list from the headless service's stable DNS names.
* :mod:`~thalweg_bytewax.cluster.peers` — wait, bounded, until every peer's name resolves.
* :mod:`~thalweg_bytewax.cluster.recovery_init` — create the recovery partitions once.
* :mod:`~thalweg_bytewax.cluster.supervise` — run the flow's process, pass signals on, and
  end with its exit code, so a pod whose peer died restarts and the cluster resumes
  together from the last committed epoch.

``thalweg cluster FLOW`` puts them together (docs/deploy.md).
"""

from __future__ import annotations

from thalweg_bytewax.cluster.peers import wait_for_peers
from thalweg_bytewax.cluster.recovery_init import ensure_recovery_partitions
from thalweg_bytewax.cluster.supervise import cluster_argv, run_supervised
from thalweg_bytewax.cluster.topology import ClusterError, Topology, topology_from_env

__all__ = [
    "ClusterError",
    "Topology",
    "cluster_argv",
    "ensure_recovery_partitions",
    "run_supervised",
    "topology_from_env",
    "wait_for_peers",
]
