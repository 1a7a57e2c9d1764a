"""Create a cluster's recovery partitions once, and never again.

``python -m bytewax.recovery DIR N`` run on a directory that holds partitions fails, and
a fresh set next to an old one would lose the cluster's state: so only process 0 creates
them, only when its directory holds none, in a staging directory first and then moved in,
so a crash midway leaves no half-made partition.

Process 0 creates them before it joins the cluster, and the cluster forms only once every
process joined: so when Bytewax looks for the partitions they exist, whether the
directory is shared by every process or is process 0's own volume (Bytewax finds each
partition on whichever process holds it). The other processes create nothing.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from bytewax.recovery import init_db_dir

from thalweg_bytewax.cluster.topology import ClusterError

__all__ = ["ensure_recovery_partitions", "partition_files"]

log = logging.getLogger(__name__)

_PART = re.compile(r"^part-([0-9]+)\.sqlite3$")
_STAGING = ".thalweg-recovery-init"


def partition_files(directory: Path) -> list[Path]:
    """The recovery partitions ``directory`` holds (``part-N.sqlite3``), in index order."""
    if not directory.is_dir():
        return []
    found = [(int(m[1]), p) for p in directory.iterdir() if (m := _PART.match(p.name))]
    return [p for _, p in sorted(found)]


def ensure_recovery_partitions(directory: Path, count: int, *, process_id: int) -> bool:
    """Create ``count`` recovery partitions in ``directory`` if this is process 0 and none exist.

    Args:
        directory: The recovery directory (``-r``); created if missing.
        count: How many partitions a new store gets.
        process_id: This process's id: only process 0 creates partitions.

    Returns:
        ``True`` when this call created the partitions, ``False`` when it left the
        directory as it was (another process, or partitions already there).

    Raises:
        ClusterError: ``count`` is below 1.
    """
    if count < 1:
        msg = f"the recovery partition count is {count}; it must be 1 or more"
        raise ClusterError(msg)
    directory.mkdir(parents=True, exist_ok=True)
    if process_id != 0:
        return False
    existing = partition_files(directory)
    if existing:
        log.info("recovery store %s holds %d partition(s): resuming", directory, len(existing))
        return False
    staging = directory / _STAGING
    shutil.rmtree(staging, ignore_errors=True)  # a start that crashed while creating
    staging.mkdir()
    init_db_dir(staging, count)  # type: ignore[no-untyped-call]  # bytewax is untyped
    for part in partition_files(staging):
        part.rename(directory / part.name)
    staging.rmdir()
    log.info("created %d recovery partition(s) in %s", count, directory)
    return True
