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
    "LANE_MARKER",
    "STAGING_PREFIX",
    "LaneStore",
    "final_name",
    "open_store",
    "topic_dir_name",
]

STAGING_PREFIX = ".staging-"
"""Staging files start with ``.``: pyarrow datasets and DuckDB globs never read them."""
LANE_MARKER = ".thalweg-lane"
"""The file naming the one step that writes a lane (hidden from readers)."""
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

    def claim(self, owner: str) -> None:
        """Record ``owner`` (a step id) as the only writer of this lane, or refuse.

        Two sinks on one path would finalize files under each other's names and take
        each other's files for their own coverage. The first writer leaves
        ``.thalweg-lane`` (hidden from readers) holding its step id; a sink of another
        step is refused before any data moves.

        Raises:
            ConfigError: When the lane belongs to another step.
        """
        marker = self.join(LANE_MARKER)
        content = f"{owner}\n".encode()
        if self.local:
            staging = self.join(f"{STAGING_PREFIX}marker-{uuid.uuid4().hex}")
            with open(staging, "wb") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(staging, marker)  # atomic create-if-absent, complete content
            except FileExistsError:
                pass
            finally:
                os.remove(staging)
            with open(marker, "rb") as f:
                current = f.read().decode().strip()
        else:
            info = self.fs.get_file_info(marker)
            if info.type == pafs.FileType.NotFound:
                with self.fs.open_output_stream(marker) as out:
                    out.write(content)
            with self.fs.open_input_stream(marker) as inp:
                current = inp.read().decode().strip()
        if current != owner:
            msg = (
                f"parquet sink `{owner}`: lane path `{self.root}` is written by step "
                f"`{current}` (see `{LANE_MARKER}` there); two sinks on one path overwrite and "
                f"skip each other's files. Give each step its own path, or delete the marker "
                f"if step `{current}` is gone for good"
            )
            raise ConfigError(msg)

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
