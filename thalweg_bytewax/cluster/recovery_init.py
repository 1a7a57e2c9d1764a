"""Create a cluster's recovery partitions once, and never again.

``python -m bytewax.recovery DIR N`` run on a directory that holds partitions fails, and
a fresh set next to an old one would lose the cluster's state: so only process 0 creates
them, only when its directory holds none.

The set is made in a staging directory (``.thalweg-recovery-init``), marked complete
(``COMPLETE`` inside it, fsynced) and only then moved in, one ``rename`` per partition.
A start that finds the staging directory finishes what the last one began:

* staging without its mark (killed while Bytewax created the files): removed and made
  again, as the directory holds no partition yet;
* staging with its mark (killed between the renames): the partitions still in it are
  moved in, next to the ones already there, none made again;
* partitions and no staging: the store exists; the cluster resumes from it.

So the directory holds either no partition or the whole set, and a killed start never
leaves a store Bytewax refuses (``MissingPartitionsError``) or one made twice.

Process 0 creates them before it joins the cluster, and the cluster forms only once every
process joined: so when Bytewax looks for the partitions they exist, whether the
directory is shared by every process or is process 0's own volume (Bytewax finds each
partition on whichever process holds it). The other processes create nothing.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from bytewax.recovery import init_db_dir

from thalweg_bytewax import _faults
from thalweg_bytewax.cluster.topology import ClusterError
from thalweg_bytewax.system.durable import fsync_path

__all__ = ["ensure_recovery_partitions", "partition_files"]

log = logging.getLogger(__name__)

_PART = re.compile(r"^part-([0-9]+)\.sqlite3$")
_STAGING = ".thalweg-recovery-init"
_COMPLETE = "COMPLETE"


def partition_files(directory: Path) -> list[Path]:
    """The recovery partitions ``directory`` holds (``part-N.sqlite3``), in index order."""
    if not directory.is_dir():
        return []
    found = [(int(m[1]), p) for p in directory.iterdir() if (m := _PART.match(p.name))]
    return [p for _, p in sorted(found)]


def _stage(staging: Path, count: int) -> None:
    """Make ``count`` partitions in ``staging``, durable, then mark the set complete."""
    shutil.rmtree(staging, ignore_errors=True)  # a start killed while creating them
    staging.mkdir()
    init_db_dir(staging, count)  # type: ignore[no-untyped-call]  # bytewax is untyped
    for part in partition_files(staging):
        with part.open("rb") as f:
            os.fsync(f.fileno())
    mark = staging / _COMPLETE
    with mark.open("w") as f:
        f.write(f"{count}\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_path(staging)


def _move_in(staging: Path, directory: Path) -> int:
    """Move every partition left in ``staging`` into ``directory``; drop ``staging``."""
    moved = 0
    for part in partition_files(staging):
        target = directory / part.name
        if target.exists():
            msg = (
                f"{target} exists and {part} waits to be moved onto it; a store must not "
                f"be made twice: keep the one in {directory}, remove {staging}"
            )
            raise ClusterError(msg)
        _faults.checkpoint("cluster.recovery_init.before_rename")
        part.rename(target)
        _faults.checkpoint("cluster.recovery_init.after_rename")
        moved += 1
    fsync_path(directory)
    shutil.rmtree(staging)
    return moved


def ensure_recovery_partitions(directory: Path, count: int, *, process_id: int) -> bool:
    """Create ``count`` recovery partitions in ``directory`` if this is process 0 and none exist.

    A start killed midway is finished by the next one (the module's docstring).

    Args:
        directory: The recovery directory (``-r``); created if missing.
        count: How many partitions a new store gets.
        process_id: This process's id: only process 0 creates partitions.

    Returns:
        ``True`` when this call created partitions or finished moving them in, ``False``
        when it left the directory as it was (another process, or the store complete).

    Raises:
        ClusterError: ``count`` is below 1, or the directory holds partitions and a
            staging directory without its completion mark (a state no start leaves).
    """
    if count < 1:
        msg = f"the recovery partition count is {count}; it must be 1 or more"
        raise ClusterError(msg)
    directory.mkdir(parents=True, exist_ok=True)
    if process_id != 0:
        return False
    staging = directory / _STAGING
    existing = partition_files(directory)
    if staging.is_dir() and (staging / _COMPLETE).is_file():
        moved = _move_in(staging, directory)
        log.info(
            "finished moving a new recovery store into %s: %d partition(s) moved now, "
            "%d already there",
            directory,
            moved,
            len(existing),
        )
        return True
    if existing:
        if staging.exists():
            msg = (
                f"{directory} holds {len(existing)} recovery partition(s) and an "
                f"unfinished staging directory {staging}; keep the partitions and "
                f"remove {staging}"
            )
            raise ClusterError(msg)
        log.info("recovery store %s holds %d partition(s): resuming", directory, len(existing))
        return False
    _stage(staging, count)
    _move_in(staging, directory)
    log.info("created %d recovery partition(s) in %s", count, directory)
    return True
