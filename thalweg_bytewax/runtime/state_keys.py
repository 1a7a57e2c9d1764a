"""The keys a recovery store holds a routed step's state under: routing keys or legacy ones.

``twg.dedup`` and ``twg.validate`` (windowed rules) keep their state under each source
partition's routing key (:func:`~thalweg_bytewax.runtime.placement.routing_key`). A
recovery store written by a release before routing keys holds that state under the
partition key itself, and Bytewax hands a stateful step only the state of the keys it
sees: run on routing keys, such a step would start empty (a replayed record passes
dedup again, a ``unique`` window forgets what it saw) while the old state lies unread.

So before a routed step keys its first batch, it reads the store the run resumes from
(:func:`recovery_directory`) and asks :func:`stored_key_style` which keys its state is
under. ``LEGACY`` (partition keys) keeps the step on the partition keys for this run and
every later one on that store — the state is found and kept exactly as before, only the
step may run on another worker than the one reading the partition (batches may cross); a
warning says so once. A run of several processes stops instead (each process keys the
partitions it reads, and one need not see the recovery partitions another holds, so they
could disagree): migrate first. ``ROUTED`` or ``NONE`` (a new store, or a step new to
it) use routing keys. ``MIXED`` (a migration that stopped part-way) stops the run and
says how to finish it. :func:`migrate_state_keys` (``thalweg recovery migrate-keys``)
rewrites a stopped flow's legacy keys as routing keys: Bytewax routes every snapshot it
loads to the worker its key hashes to, whichever partition file holds it, so the
rewritten state is found where the routed step runs.

The store is found, in order: the directory declared for the run
(:func:`declare_recovery_directory` or :func:`recovery_declared`, which ``thalweg
batch`` calls), the ``-r`` of ``python -m bytewax.run`` (``thalweg run``), and
otherwise the recovery partitions this process has open (``bytewax.testing.run_main`` or
``cluster_main`` called with a ``RecoveryConfig``: Bytewax opens them before the
dataflow runs). A run without recovery has no store: routing keys.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime._bytewax_run import bytewax_run_arguments
from thalweg_bytewax.runtime.placement import partition_of_routing_key, routing_key

__all__ = [
    "KeyStyle",
    "Migrated",
    "declare_recovery_directory",
    "is_routing_key",
    "migrate_state_keys",
    "new_run",
    "recovery_directory",
    "recovery_declared",
    "run_generation",
    "stored_key_style",
]

logger = logging.getLogger(__name__)

_PART_FILE = re.compile(r"part-\d+\.sqlite3")
_ROUTED_SHAPE = re.compile(r".+@[0-9a-f]{8}")


class KeyStyle(enum.Enum):
    """Which keys a step's state is stored under in a recovery store."""

    NONE = "none"
    """No state of the step: a new store, or a step new to it."""
    ROUTED = "routed"
    """Routing keys (``<partition>@<salt>``), as this release writes them."""
    LEGACY = "legacy"
    """Partition keys, as releases before routing keys wrote them."""
    MIXED = "mixed"
    """Both: a migration stopped part-way."""


def is_routing_key(key: str) -> bool:
    """Whether ``key`` is the routing key of the partition key it was made from."""
    return _ROUTED_SHAPE.fullmatch(key) is not None and (
        routing_key(partition_of_routing_key(key)) == key
    )


# -- which store ----------------------------------------------------------------------------

_declared: Path | None = None
_generation = 0


def declare_recovery_directory(directory: str | os.PathLike[str] | None) -> None:
    """Name the recovery directory this process's run resumes from (None: none declared).

    A program calling ``bytewax.run.cli_main``, ``bytewax.testing.run_main`` or
    ``cluster_main`` with a ``RecoveryConfig`` may declare its ``db_dir`` here; without
    it the recovery partitions the process has open are read.
    """
    global _declared  # noqa: PLW0603 - one run at a time per process
    _declared = Path(directory) if directory is not None else None
    new_run()


@contextmanager
def recovery_declared(directory: str | os.PathLike[str] | None) -> Iterator[None]:
    """:func:`declare_recovery_directory` for one run: the declaration ends with the block."""
    previous = _declared
    declare_recovery_directory(directory)
    try:
        yield
    finally:
        declare_recovery_directory(previous)


def new_run() -> None:
    """A run starts in this process (its sources list partitions): decide keys afresh."""
    global _generation  # noqa: PLW0603 - a counter routed steps compare with
    _generation += 1


def run_generation() -> int:
    """How many runs this process started (see :func:`new_run`)."""
    return _generation


def _from_bytewax_run() -> Path | None:
    kwargs = bytewax_run_arguments()
    config = kwargs.get("recovery_config") if kwargs is not None else None
    db_dir = getattr(config, "db_dir", None)
    return Path(db_dir) if db_dir else None


def _open_partitions() -> Path | None:
    """The directory of the Bytewax recovery partitions this process has open, if any."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        path = Path(target)
        if _PART_FILE.fullmatch(path.name):
            return path.parent
    return None


def recovery_directory() -> Path | None:
    """The recovery directory this process's run resumes from, None without recovery."""
    return _declared or _from_bytewax_run() or _open_partitions()


# -- what the store holds -------------------------------------------------------------------


def _partition_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if _PART_FILE.fullmatch(p.name))


def _open_here() -> dict[Path, int]:
    """The files this process has open (the engine's recovery partitions among them)."""
    out: dict[Path, int] = {}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            out.setdefault(Path(os.readlink(f"/proc/self/fd/{fd}")), int(fd))
        except (OSError, ValueError):
            continue
    return out


def _read_through(fd: int, path: Path) -> bytes | None:
    """The whole file behind ``fd``, read at offsets: ``fd`` is neither moved nor closed.

    None when ``fd`` no longer holds ``path``: the engine closed it after the listing
    (or its number now holds another file).
    """
    try:
        held, named = os.fstat(fd), os.stat(path)
        if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
            return None
        chunks, at = [], 0
        while at < held.st_size:
            chunk = os.pread(fd, min(held.st_size - at, 1 << 24), at)
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
    except OSError as exc:
        if exc.errno in (errno.EBADF, errno.ENOENT):
            return None
        raise
    return b"".join(chunks)


@contextmanager
def _readable(db: Path) -> Iterator[Path]:
    """A path to read ``db`` at without touching the engine's locks on it.

    POSIX drops every lock a process holds on a file when the process closes any
    descriptor of it, and the engine's SQLite is not Python's: opening (or merely
    reading) a partition the engine has open in this process, then closing it, would
    release the engine's locks, and another process could then truncate the shared
    memory the engine has mapped. So a partition open here is read through the
    engine's own descriptors (never closed) into a private copy; one not open here is
    read in place, as any other process reads it.
    """
    for _ in range(3):  # the engine may close a descriptor between listing and reading
        here = _open_here()
        fd = here.get(db.resolve())
        if fd is None:
            yield db
            return
        wal = db.resolve().with_name(f"{db.name}-wal")
        wal_fd = here.get(wal)
        # The log first: frames past a torn end are ignored.
        log = _read_through(wal_fd, wal) if wal_fd is not None else b""
        body = _read_through(fd, db.resolve()) if log is not None else None
        if body is None:
            continue
        with tempfile.TemporaryDirectory(prefix="thalweg-state-keys-") as tmp:
            copy = Path(tmp) / db.name
            if wal_fd is not None:
                Path(f"{copy}-wal").write_bytes(log or b"")
            copy.write_bytes(body)
            yield copy
        return
    yield db  # open and closed here three times over: no longer held, read in place


def _live_keys(db: Path, step_id: str | None) -> Iterator[tuple[str, str]]:
    """(step, key) whose newest snapshot in ``db`` holds state (a discard removes a key)."""
    where = "WHERE step_id = ?" if step_id is not None else ""
    query = f"""
        SELECT step_id, state_key FROM snaps AS s {where}
        GROUP BY step_id, state_key
        HAVING (SELECT ser_change IS NOT NULL FROM snaps AS t
                WHERE t.step_id = s.step_id AND t.state_key = s.state_key
                ORDER BY snap_epoch DESC LIMIT 1)
    """  # noqa: S608 - the only interpolation is the fixed WHERE clause
    args = (step_id,) if step_id is not None else ()
    for attempt in range(3):
        try:
            with _readable(db) as path:
                # In place read-only; a private copy may need its log replayed.
                uri = f"{path.resolve().as_uri()}?mode=ro" if path == db else str(path)
                with closing(sqlite3.connect(uri, uri=path == db, timeout=30)) as con:
                    rows = con.execute(query, args).fetchall()
        except sqlite3.DatabaseError:
            if attempt == 2:  # noqa: PLR2004 - a copy taken mid-write, three times
                raise
            continue
        yield from rows
        return


def stored_key_style(directory: str | os.PathLike[str], step_id: str) -> KeyStyle:
    """Which keys the store in ``directory`` holds ``step_id``'s state under.

    Args:
        directory: A Bytewax recovery directory (its ``part-N.sqlite3`` files).
        step_id: The stateful step's full id, as the store's ``snaps`` table names it
            (``<flow>.<step>....stateful_batch``).
    """
    routed = legacy = False
    for db in _partition_files(Path(directory)):
        for _, key in _live_keys(db, step_id):
            if is_routing_key(key):
                routed = True
            else:
                legacy = True
    if routed and legacy:
        return KeyStyle.MIXED
    if legacy:
        return KeyStyle.LEGACY
    return KeyStyle.ROUTED if routed else KeyStyle.NONE


# -- the migration --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Migrated:
    """What :func:`migrate_state_keys` rewrote: per step, its keys' snapshot rows."""

    rows: dict[str, int]
    """Step id -> snapshot rows whose key became a routing key."""


def migrate_state_keys(
    directory: str | os.PathLike[str], step_ids: Iterable[str], *, dry_run: bool = False
) -> Migrated:
    """Rewrite the legacy state keys of ``step_ids`` in a stopped flow's store as routing keys.

    Every snapshot row (every epoch, discards included) of each step whose key is a
    partition key gets that partition's routing key, one transaction a partition file.
    Run it only while no process of the flow runs. Idempotent: a migration that stopped
    part-way (the store ``MIXED``) finishes when run again: a key's rows in another
    file keep their epochs, and Bytewax resumes each key from its newest snapshot in
    any file, as after a rescale.

    Args:
        directory: The flow's recovery directory.
        step_ids: The routed steps' full ids (only these: a source's or sink's state is
            keyed by partition or shard on purpose and must keep its keys).
        dry_run: Count what would change, change nothing.

    Raises:
        ConfigError: ``directory`` holds no recovery partition, or a snapshot of one
            epoch is stored under both a key and its routing key (the file is left as
            it was).
    """
    root = Path(directory)
    files = _partition_files(root) if root.is_dir() else []
    if not files:
        msg = f"{root}: no Bytewax recovery partition (part-N.sqlite3) to migrate"
        raise ConfigError(msg)
    steps = sorted(set(step_ids))
    counts = dict.fromkeys(steps, 0)
    for db in files:
        try:
            with closing(sqlite3.connect(db, timeout=30)) as con, con:
                for step in steps:
                    keys = con.execute(
                        "SELECT state_key, COUNT(*) FROM snaps WHERE step_id = ? "
                        "GROUP BY state_key",
                        (step,),
                    ).fetchall()
                    for key, rows in keys:
                        if is_routing_key(key):
                            continue
                        counts[step] += int(rows)
                        if not dry_run:
                            con.execute(
                                "UPDATE snaps SET state_key = ? "
                                "WHERE step_id = ? AND state_key = ?",
                                (routing_key(key), step, key),
                            )
        except sqlite3.IntegrityError as exc:
            msg = (
                f"{db}: a snapshot of the same epoch is stored under a partition key and "
                f"under its routing key ({exc}); which one is current cannot be told: "
                "restore the store from its backup and migrate that (nothing in this file "
                "was changed)"
            )
            raise ConfigError(msg) from exc
    return Migrated(rows=counts)
