"""``python -m thalweg_bytewax.cluster.runner``: ``python -m bytewax.run`` with readiness.

The flow's process of ``thalweg cluster``. It takes ``bytewax.run``'s command line and
runs the flow as ``bytewax.run`` does, with four things first:

1. the readiness-critical component ``cluster`` (:mod:`.readiness`), down until the
   cluster has formed;
2. the HTTP server, when ``THALWEG_HTTP_PORT`` is set, started now rather than when the
   first partition is built (after the cluster formed): ``/ready`` answers, not ready,
   while this process waits for its peers, and ``/live`` answers alive;
3. the formation probe added to the flow, and the watch of the peers' connections;
4. the cluster declared to placement (:func:`~thalweg_bytewax.runtime.placement.declare_cluster`),
   so each source reads only the partitions placed on this process's workers.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta
from typing import Any

from thalweg_bytewax.cluster.readiness import ClusterReadiness, add_formation_probe
from thalweg_bytewax.runtime.placement import declare_cluster

__all__ = ["main"]

log = logging.getLogger(__name__)


def _bytewax_kwargs() -> dict[str, Any]:
    """``bytewax.run``'s arguments, read and completed as its ``__main__`` does."""
    from bytewax import run  # noqa: PLC0415 - the runner's own process only
    from bytewax.recovery import RecoveryConfig  # noqa: PLC0415

    # The same command line, checked the same way (bytewax.run is untyped).
    args = run._parse_args()  # type: ignore[no-untyped-call]  # noqa: SLF001
    kwargs: dict[str, Any] = dict(vars(args))
    snapshot_interval = kwargs.pop("snapshot_interval")
    recovery_directory = kwargs.pop("recovery_directory")
    backup_interval = kwargs.pop("backup_interval")
    kwargs["recovery_config"] = None
    if recovery_directory is not None:
        kwargs["epoch_interval"] = snapshot_interval
        kwargs["recovery_config"] = RecoveryConfig(recovery_directory, backup_interval)  # type: ignore[no-untyped-call]
    else:
        kwargs["epoch_interval"] = snapshot_interval or timedelta(seconds=10)
    addresses = kwargs.pop("addresses")
    if addresses is not None:
        kwargs["addresses"] = addresses.split(";")
    kwargs["import_str"] = run._prepare_import(kwargs.pop("import_str"))  # noqa: SLF001
    return kwargs


def main() -> None:
    """Run the flow ``sys.argv`` names as one process of a cluster (see the module)."""
    from bytewax import run  # noqa: PLC0415 - the runner's own process only

    sys.argv[0] = "python -m thalweg_bytewax.cluster.runner"
    kwargs = _bytewax_kwargs()
    addresses = kwargs.get("addresses") or []
    readiness = ClusterReadiness(kwargs.get("process_id") or 0, addresses) if addresses else None
    # bytewax.run's own __main__ is not this module, so placement cannot read the cluster
    # from it: declared here, each source lists only its own partitions, on the worker
    # that reads them (not every partition everywhere, placed by Bytewax).
    declare_cluster(
        workers_per_process=kwargs.get("workers_per_process") or 1,
        process_id=kwargs.get("process_id"),
        processes=len(addresses) or 1,
    )
    module, attr = kwargs.pop("import_str")
    flow = run._locate_dataflow(module, attr)  # type: ignore[no-untyped-call]  # noqa: SLF001
    if os.environ.get("THALWEG_HTTP_PORT"):
        from thalweg_bytewax.observability import observe  # noqa: PLC0415 - the extra's SDK

        observe()
    if readiness is not None:
        add_formation_probe(flow, readiness.dataflow_started)
        readiness.watch()
    run.cli_main(flow, **kwargs)  # type: ignore[no-untyped-call]  # bytewax.run is untyped


if __name__ == "__main__":
    main()
