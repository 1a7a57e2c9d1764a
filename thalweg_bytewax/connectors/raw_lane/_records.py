"""Private: a lane's own records, each created exactly once: its owner and its schemas.

Beside the topic directories a lane holds ``.thalweg-lane`` (the step id of the only
sink that writes it: :func:`claim_lane`) and ``.thalweg-schema-<version>.arrow`` (each
version of the lane's schema: :func:`newest_schema`, :func:`record_schema`). Both are
written with :func:`create_exclusive`, a conditional create, so two writers racing for
one name cannot both win. :class:`~thalweg_bytewax.connectors.raw_lane._store.LaneStore`
answers each of them as a method.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.errors import ConfigError

from ._names import LANE_MARKER, SCHEMA_RECORD, STAGING_PREFIX

__all__ = ["LaneStorage", "claim_lane", "create_exclusive", "newest_schema", "record_schema"]


class LaneStorage(Protocol):
    """What these records need of a lane's storage (``_store.LaneStore`` is one)."""

    @property
    def fs(self) -> pafs.FileSystem:
        """The lane's filesystem."""

    @property
    def root(self) -> str:
        """The lane's directory on ``fs``."""

    @property
    def local(self) -> bool:
        """Whether ``fs`` is the local filesystem."""

    @property
    def component(self) -> str:
        """The sink's name in messages."""

    def join(self, *parts: str) -> str:
        """A path under the lane's directory."""

    def list_names(self, path: str) -> list[str]:
        """The names in directory ``path``."""

    def sync_dir(self, path: str) -> None:
        """Make directory ``path``'s entries durable (local filesystems)."""

logger = logging.getLogger("thalweg_bytewax.connectors.raw_lane._store")


def claim_lane(store: LaneStorage, owner: str) -> None:
    """Record ``owner`` (a step id) as the only writer of this lane, or refuse.

    Two sinks on one path would finalize files under each other's names and take
    each other's files for their own coverage. The first writer leaves
    ``.thalweg-lane`` (hidden from readers) holding its step id; a sink of another
    step is refused before any data moves.

    Raises:
        ConfigError: When the lane belongs to another step.
    """
    marker = store.join(LANE_MARKER)
    create_exclusive(store, marker, f"{owner}\n".encode())
    with store.fs.open_input_stream(marker) as inp:
        current = inp.read().decode().strip()
    if current != owner:
        msg = (
            f"{store.component} `{owner}`: lane path `{store.root}` is written by step "
            f"`{current}` (see `{LANE_MARKER}` there); two sinks on one path overwrite and "
            f"skip each other's files. Give each step its own path, or delete the marker "
            f"if step `{current}` is gone for good"
        )
        raise ConfigError(msg)


def create_exclusive(store: LaneStorage, path: str, content: bytes) -> bool:
    """Write ``content`` to ``path`` only if no file is there; True if this call did.

    A conditional write, so two writers racing for one name cannot both win: local,
    a complete temporary file is hard-linked to ``path`` (atomic, fails if it
    exists); fsspec file systems (``PyFileSystem(FSSpecHandler(fs))``) open the name
    in exclusive mode ``"xb"`` (s3fs sends ``If-None-Match: *``). A native
    ``pyarrow.fs`` object store has no conditional write: there the name is checked,
    then written, and a warning says the race is not excluded.
    """
    if store.local:
        staging = store.join(f"{STAGING_PREFIX}create-{uuid.uuid4().hex}")
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
        store.sync_dir(os.path.dirname(path))
        return True
    fsspec_fs = getattr(getattr(store.fs, "handler", None), "fs", None)
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
        store.component,
        store.fs.type_name,
        path,
    )
    if store.fs.get_file_info(path).type != pafs.FileType.NotFound:
        return False
    with store.fs.open_output_stream(path) as out:
        out.write(content)
    return True


def newest_schema(store: LaneStorage) -> tuple[int, pa.Schema | None]:
    """The newest recorded version of the lane's schema: ``(version, schema)``.

    ``(0, None)`` when the lane has no record yet.
    """
    versions = [
        int(m.group(1)) for m in map(SCHEMA_RECORD.match, store.list_names(store.root)) if m
    ]
    if not versions:
        return 0, None
    version = max(versions)
    with store.fs.open_input_stream(store.join(_schema_record_name(version))) as inp:
        schema = pa.ipc.read_schema(pa.py_buffer(inp.read()))
    return version, schema


def record_schema(store: LaneStorage, version: int, schema: pa.Schema) -> bool:
    """Record ``schema`` as version ``version``; False if another writer took it.

    Versions are created exclusively (:func:`create_exclusive`), never rewritten,
    so writers racing for one version cannot both win: the loser reads the new
    version and plans again.
    """
    content = schema.serialize().to_pybytes()
    return create_exclusive(store, store.join(_schema_record_name(version)), content)


def _schema_record_name(version: int) -> str:
    return f".thalweg-schema-{version:08d}.arrow"
