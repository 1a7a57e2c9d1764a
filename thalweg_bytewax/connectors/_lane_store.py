"""Private file-system access for lane sinks: staging, durable finalize, listing.

Two implementations behind one small interface: the local file system (with fsync of
files and directories, and atomic ``os.replace``), and any ``pyarrow.fs`` file system
(S3, GCS, HDFS, or fsspec through ``PyFileSystem``), where ``move`` is the finalize and
durability is the store's own.
"""

from __future__ import annotations

import contextlib
import errno
import filecmp
import hashlib
import logging
import os
import re
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.errors import ConfigError, SinkTerminalError

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

STAGING_PREFIX = ".staging-"
"""Staging files start with ``.``: pyarrow datasets and DuckDB globs never read them."""
LANE_MARKER = ".thalweg-lane"
"""The file naming the one step that writes a lane (hidden from readers)."""
FINAL_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")
"""Finalized file names: ``<first offset>-<last offset>.parquet``, zero-padded."""
SCHEMA_RECORD = re.compile(r"^\.thalweg-schema-(\d{8})\.arrow$")
"""The lane's schema versions (hidden from readers): ``.thalweg-schema-<version>.arrow``."""

_MAX_DIR_NAME = 200


def final_name(first: int, last: int) -> str:
    """The deterministic file name of a finalized span of offsets."""
    return f"{first:020d}-{last:020d}.parquet"


def staging_prefix(shard: int) -> str:
    """The name prefix of the staging files of sink shard ``shard``.

    A shard owns its topic-partitions alone, so at start it removes the staging files
    its previous run left behind (``.staging-s003-…``) wherever they are, even in
    partitions it never writes again, without touching another shard's live files.
    """
    return f"{STAGING_PREFIX}s{shard:03d}-"


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
        """Record ``owner`` (a step id) as the only writer of this lane, or refuse.

        Two sinks on one path would finalize files under each other's names and take
        each other's files for their own coverage. The first writer leaves
        ``.thalweg-lane`` (hidden from readers) holding its step id; a sink of another
        step is refused before any data moves.

        Raises:
            ConfigError: When the lane belongs to another step.
        """
        marker = self.join(LANE_MARKER)
        self.create_exclusive(marker, f"{owner}\n".encode())
        with self.fs.open_input_stream(marker) as inp:
            current = inp.read().decode().strip()
        if current != owner:
            msg = (
                f"{self.component} `{owner}`: lane path `{self.root}` is written by step "
                f"`{current}` (see `{LANE_MARKER}` there); two sinks on one path overwrite and "
                f"skip each other's files. Give each step its own path, or delete the marker "
                f"if step `{current}` is gone for good"
            )
            raise ConfigError(msg)

    def create_exclusive(self, path: str, content: bytes) -> bool:
        """Write ``content`` to ``path`` only if no file is there; True if this call did.

        A conditional write, so two writers racing for one name cannot both win: local,
        a complete temporary file is hard-linked to ``path`` (atomic, fails if it
        exists); fsspec file systems (``PyFileSystem(FSSpecHandler(fs))``) open the name
        in exclusive mode ``"xb"`` (s3fs sends ``If-None-Match: *``). A native
        ``pyarrow.fs`` object store has no conditional write: there the name is checked,
        then written, and a warning says the race is not excluded.
        """
        if self.local:
            staging = self.join(f"{STAGING_PREFIX}create-{uuid.uuid4().hex}")
            with open(staging, "wb") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(staging, path)  # atomic create-if-absent, complete content
            except FileExistsError:
                return False
            finally:
                os.remove(staging)
            self.sync_dir(os.path.dirname(path))
            return True
        fsspec_fs = getattr(getattr(self.fs, "handler", None), "fs", None)
        if fsspec_fs is not None:
            try:
                with fsspec_fs.open(path, "xb") as f:
                    f.write(content)
            except FileExistsError:
                return False
            except (NotImplementedError, ValueError):
                pass  # this fsspec file system has no exclusive mode
            else:
                return True
        logger.warning(
            "%s: file system `%s` has no conditional write; `%s` is checked, "
            "then written, so two writers starting at once are not excluded (wrap an "
            "fsspec file system with `PyFileSystem(FSSpecHandler(fs))` for an exclusive "
            "create)",
            self.component,
            self.fs.type_name,
            path,
        )
        if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            return False
        with self.fs.open_output_stream(path) as out:
            out.write(content)
        return True

    def newest_schema(self) -> tuple[int, pa.Schema | None]:
        """The newest recorded version of the lane's schema: ``(version, schema)``.

        ``(0, None)`` when the lane has no record yet.
        """
        versions = [
            int(m.group(1)) for m in map(SCHEMA_RECORD.match, self.list_names(self.root)) if m
        ]
        if not versions:
            return 0, None
        version = max(versions)
        with self.fs.open_input_stream(self.join(_schema_record_name(version))) as inp:
            schema = pa.ipc.read_schema(pa.py_buffer(inp.read()))
        return version, schema

    def record_schema(self, version: int, schema: pa.Schema) -> bool:
        """Record ``schema`` as version ``version``; False if another writer took it.

        Versions are created exclusively (:meth:`create_exclusive`), never rewritten,
        so writers racing for one version cannot both win: the loser reads the new
        version and plans again.
        """
        content = schema.serialize().to_pybytes()
        return self.create_exclusive(self.join(_schema_record_name(version)), content)

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


def _schema_record_name(version: int) -> str:
    return f".thalweg-schema-{version:08d}.arrow"


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
