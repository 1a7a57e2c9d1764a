"""Private file-system access for lane sinks: staging, durable finalize, listing.

Two implementations behind one small interface: the local file system (with fsync of
files and directories, and atomic ``os.replace``), and any ``pyarrow.fs`` file system
(S3, GCS, HDFS, or fsspec through ``PyFileSystem``), where ``move`` is the finalize and
durability is the store's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "FINAL_NAME",
    "STAGING_PREFIX",
    "LaneStore",
    "final_name",
    "open_store",
    "topic_dir_name",
]

STAGING_PREFIX = ".staging-"
"""Staging files start with ``.``: pyarrow datasets and DuckDB globs never read them."""
FINAL_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")
"""Finalized file names: ``<first offset>-<last offset>.parquet``, zero-padded."""

_MAX_DIR_NAME = 200


def final_name(first: int, last: int) -> str:
    """The deterministic file name of a finalized span of offsets."""
    return f"{first:020d}-{last:020d}.parquet"


def topic_dir_name(topic: str) -> str:
    """A directory name for ``topic`` that is safe, reversible where short, and visible.

    Characters outside ``[A-Za-z0-9._-]`` are percent-encoded; a leading ``.`` or ``_``
    (``__consumer_offsets``) is encoded too, because readers skip such names. Names
    longer than 200 characters keep a prefix plus a digest, so they stay unique.
    """
    name = urllib.parse.quote(topic, safe="-._")
    if name[:1] in (".", "_"):
        name = f"%{ord(name[0]):02X}{name[1:]}"
    if len(name) > _MAX_DIR_NAME:
        digest = hashlib.blake2b(topic.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        name = f"{name[:150]}~{digest}"
    return name


@dataclass(frozen=True)
class LaneStore:
    """A root directory on a file system, with the operations a lane sink needs."""

    fs: pafs.FileSystem
    root: str
    local: bool

    def join(self, *parts: str) -> str:
        """Join path parts under the root."""
        return "/".join((self.root.rstrip("/"), *parts))

    @staticmethod
    def child(directory: str, name: str) -> str:
        """The path of ``name`` inside ``directory`` (a full path, not under the root)."""
        return f"{directory.rstrip('/')}/{name}"

    def ensure_dir(self, path: str) -> None:
        """Create ``path`` and its parents."""
        self.fs.create_dir(path, recursive=True)

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

    def finalize(self, staging: str, final: str) -> None:
        """Make a closed staging file durable and visible under its final name.

        Local: fsync the file, ``os.replace`` (atomic), then the caller fsyncs the
        directory once per batch of renames (:meth:`sync_dir`).
        """
        if self.local:
            fd = os.open(staging, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(staging, final)
        else:
            self.fs.move(staging, final)

    def sync_dir(self, path: str) -> None:
        """Flush a directory (fsync) so renames in it survive a power loss (local only)."""
        if not self.local:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self, path: str) -> None:
        """Delete a file if it exists."""
        if self.local:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)

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
                f"parquet sink: lane path `{self.root}` is not writable ({exc}); "
                f"choose a directory this process can create and write"
            )
            raise ConfigError(msg) from exc


def open_store(path: str | os.PathLike[str], filesystem: pafs.FileSystem | None) -> LaneStore:
    """Resolve a local path, a ``file://``/``s3://``/… URI, or a path on ``filesystem``."""
    text = os.fspath(path)
    if filesystem is not None:
        return LaneStore(filesystem, text.rstrip("/"), isinstance(filesystem, pafs.LocalFileSystem))
    if "://" in text:
        try:
            fs, root = pafs.FileSystem.from_uri(text)
        except (pa.ArrowException, ValueError) as exc:
            msg = f"parquet sink: cannot open lane URI `{text}` ({exc})"
            raise ConfigError(msg) from exc
        local = isinstance(fs, pafs.LocalFileSystem)
        return LaneStore(fs, root.rstrip("/"), local)
    return LaneStore(pafs.LocalFileSystem(), str(Path(text).absolute()), True)
