"""Private file-system access for lane sinks: staging, durable finalize, listing.

The names of a lane's files and directories are in ``_names`` (re-exported here).

Two implementations behind one small interface: the local file system (with fsync of
files and directories, and atomic ``os.replace``), and any ``pyarrow.fs`` file system
(S3, GCS, HDFS, or fsspec through ``PyFileSystem``), where ``move`` is the finalize and
durability is the store's own.
"""

from __future__ import annotations

import contextlib
import errno
import filecmp
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.errors import ConfigError, SinkTerminalError

from ._names import (
    FINAL_NAME,
    LANE_MARKER,
    SCHEMA_RECORD,
    STAGING_PREFIX,
    final_name,
    staging_prefix,
    topic_dir_name,
)
from ._records import claim_lane, create_exclusive, newest_schema, record_schema

__all__ = [
    "FINAL_NAME",
    "LANE_MARKER",
    "SCHEMA_RECORD",
    "STAGING_PREFIX",
    "LaneStore",
    "final_name",
    "open_store",
    "staging_prefix",
    "topic_dir_name",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaneStore:
    """A root directory on a file system, with the operations a lane sink needs."""

    fs: pafs.FileSystem
    root: str
    local: bool
    component: str = "parquet sink"
    """The sink's name in messages (``ArrowIPCSink`` shares this store)."""

    def join(self, *parts: str) -> str:
        """Join path parts under the root."""
        return "/".join((self.root.rstrip("/"), *parts))

    @staticmethod
    def child(directory: str, name: str) -> str:
        """The path of ``name`` inside ``directory`` (a full path, not under the root)."""
        return f"{directory.rstrip('/')}/{name}"

    def ensure_dir(self, path: str) -> None:
        """Create ``path`` and its parents, durably.

        Local: each directory created here has its parent fsynced, so a file renamed
        into a new topic or partition directory survives a power loss with its path.
        """
        if not self.local:
            self.fs.create_dir(path, recursive=True)
            return
        missing: list[str] = []
        current = os.path.abspath(path)
        while not os.path.isdir(current):
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory)
        for parent in dict.fromkeys(os.path.dirname(d) for d in reversed(missing)):
            self.sync_dir(parent)

    def list_names(self, path: str) -> list[str]:
        """File names directly in ``path`` (empty when it does not exist)."""
        if self.local:
            try:
                return os.listdir(path)
            except FileNotFoundError:
                return []
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        return [info.base_name for info in self.fs.get_file_info(selector)]

    def open_output(self, path: str) -> pa.NativeFile:
        """Open ``path`` for writing (truncating)."""
        return self.fs.open_output_stream(path)

    def finalize(self, staging: str, final: str, *, synced: bool = False) -> None:
        """Make a closed staging file durable and visible under its final name.

        A final file is never overwritten: local, the file is fsynced (unless
        ``synced``: the caller already did, :meth:`sync_file`) and hard-linked under its
        final name (atomic, fails if the name exists) and the staging name removed; the
        caller fsyncs the directory once per batch of renames (:meth:`sync_dir`). Other
        stores check the name, then move. A name that already holds the same bytes (a
        finalize retried) is accepted.

        Raises:
            SinkTerminalError: When ``final`` already holds a different file.
        """
        if self.local:
            if not synced:
                self.sync_file(staging)
            try:
                os.link(staging, final)
            except FileExistsError:
                self._refuse_existing(staging, final)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                # No hard links on this file system: check, then rename.
                if os.path.exists(final):
                    self._refuse_existing(staging, final)
                else:
                    os.rename(staging, final)
            else:
                os.remove(staging)
        else:
            if self.fs.get_file_info(final).type != pafs.FileType.NotFound:
                self._refuse_existing(staging, final)
                return
            self.fs.move(staging, final)

    def _same_bytes(self, a: str, b: str) -> bool:
        if self.local:
            return filecmp.cmp(a, b, shallow=False)
        infos = self.fs.get_file_info([a, b])
        if infos[0].size != infos[1].size:
            return False
        with self.fs.open_input_stream(a) as fa, self.fs.open_input_stream(b) as fb:
            return bool(fa.read() == fb.read())

    def _refuse_existing(self, staging: str, final: str) -> None:
        """Drop ``staging`` if ``final`` holds the same bytes; refuse otherwise."""
        if not self._same_bytes(staging, final):
            msg = (
                f"{self.component}: `{final}` already holds a different file; a lane never "
                f"overwrites a finalized file. Another writer wrote this topic-partition "
                f"(two flows or two sink shards on one path?): stop it, then move the lane "
                f"aside or write to a new path"
            )
            raise SinkTerminalError(msg)
        self.delete(staging)

    def sync_file(self, path: str) -> None:
        """Flush a closed file's bytes to disk (fsync; local only, others are durable at close)."""
        self._fsync(path)

    def sync_dir(self, path: str) -> None:
        """Flush a directory (fsync) so renames in it survive a power loss (local only)."""
        self._fsync(path)

    def _fsync(self, path: str) -> None:
        if not self.local:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def staging_files(self) -> list[str]:
        """Paths of the staging files in the partition directories (``<topic>/<partition>``)."""
        found: list[str] = []
        if self.local:
            for topic in _subdirs(self.root):
                for partition in _subdirs(topic):
                    found.extend(
                        self.child(partition, name)
                        for name in self.list_names(partition)
                        if name.startswith(STAGING_PREFIX)
                    )
            return found
        selector = pafs.FileSelector(self.root, allow_not_found=True, recursive=True)
        depth = self.root.rstrip("/").count("/") + 3
        return [
            info.path
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
            and info.base_name.startswith(STAGING_PREFIX)
            and info.path.rstrip("/").count("/") == depth
        ]

    def delete(self, path: str) -> None:
        """Delete a file if it exists."""
        if self.local:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)

    def claim(self, owner: str) -> None:
        """Record ``owner`` as the only writer of this lane, or refuse (:func:`claim_lane`)."""
        claim_lane(self, owner)

    def create_exclusive(self, path: str, content: bytes) -> bool:
        """Write ``path`` only if no file is there; True if this call did (a conditional create)."""
        return create_exclusive(self, path, content)

    def newest_schema(self) -> tuple[int, pa.Schema | None]:
        """The newest recorded version of the lane's schema: ``(version, schema)``."""
        return newest_schema(self)

    def record_schema(self, version: int, schema: pa.Schema) -> bool:
        """Record ``schema`` as version ``version``; False if another writer took it."""
        return record_schema(self, version, schema)

    def check_writable(self) -> None:
        """Create the root and prove a file can be written, renamed and removed there.

        Raises:
            ConfigError: Naming the path and the reason, before any data moves.
        """
        probe = self.join(f"{STAGING_PREFIX}probe-{uuid.uuid4().hex}")
        try:
            self.ensure_dir(self.root)
            with self.open_output(probe) as f:
                f.write(b"probe")
            self.delete(probe)
        except (OSError, pa.ArrowException) as exc:
            msg = (
                f"{self.component}: lane path `{self.root}` is not writable ({exc}); "
                f"choose a directory this process can create and write"
            )
            raise ConfigError(msg) from exc


def _subdirs(path: str) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def open_store(
    path: str | os.PathLike[str],
    filesystem: pafs.FileSystem | None,
    component: str = "parquet sink",
) -> LaneStore:
    """Resolve a local path, a ``file://``/``s3://``/… URI, or a path on ``filesystem``."""
    text = os.fspath(path)
    if filesystem is not None:
        local = isinstance(filesystem, pafs.LocalFileSystem)
        return LaneStore(filesystem, text.rstrip("/"), local, component)
    if "://" in text:
        try:
            fs, root = pafs.FileSystem.from_uri(text)
        except (pa.ArrowException, ValueError) as exc:
            msg = f"{component}: cannot open lane URI `{text}` ({exc})"
            raise ConfigError(msg) from exc
        local = isinstance(fs, pafs.LocalFileSystem)
        return LaneStore(fs, root.rstrip("/"), local, component)
    return LaneStore(pafs.LocalFileSystem(), str(Path(text).absolute()), True, component)
