"""The settings of the Arrow IPC sink and source, one frozen model each.

:class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSink` and
:class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSource` build them from their
keywords, a pipeline builds the sink's from a ``[sinks.<name>]`` table with ``kind =
"arrow_ipc"``, and the partitions read only them. A ``filesystem`` or a
``coverage_store`` object is an argument of the connector, not a setting.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from thalweg_bytewax.config import ConnectorConfig, Duration
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns

from .._settings import MetadataPrefix, as_location

__all__ = [
    "DEFAULT_FOLLOW_INTERVAL",
    "DEFAULT_MAX_FILE_ROWS",
    "ArrowIPCSinkConfig",
    "ArrowIPCSourceConfig",
]

# A file is closed after this many rows (it still becomes visible only at the epoch's
# snapshot): bounds what a reader maps per file on a long epoch, as the Parquet lane's.
DEFAULT_MAX_FILE_ROWS = 4 * 1024 * 1024
# How often a following source re-lists its directory: a listing is one directory walk.
DEFAULT_FOLLOW_INTERVAL = timedelta(seconds=5)
_CODECS = ("none", "lz4", "zstd")


class ArrowIPCSinkConfig(ConnectorConfig):
    """The settings of an :class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSink`.

    Example:
        >>> ArrowIPCSinkConfig(path="lake/ipc", compression="zstd").suffix
        '.arrow'
    """

    component: ClassVar[str] = "arrow ipc sink"

    path: str = Field(min_length=1)
    """The directory: a local path, a URI (`file://`, `s3://`, ...) or a path on the
    sink's `filesystem`."""
    shards: int = Field(default=16, ge=1)
    """Sink partitions the topic-partitions are spread over. Keep it fixed for a directory."""
    format: Literal["file", "stream"] = "file"
    """`file` (IPC file format, `.arrow`: random access, readers can memory-map it) or
    `stream` (IPC stream format, `.arrows`)."""
    compression: Literal["none", "lz4", "zstd"] = "none"
    """`none` (a memory-mapped read copies nothing), `lz4` or `zstd` (smaller files; a
    reader decompresses each batch)."""
    max_file_rows: int = Field(default=DEFAULT_MAX_FILE_ROWS, ge=1)
    """Rows after which a file is closed within an epoch."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return as_location(value, "a non-empty directory, URI or path on `filesystem`")

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        if value in ("file", "stream"):
            return value
        msg = f"expected 'file' (.arrow, random access) or 'stream' (.arrows); got {value!r}"
        raise ValueError(msg)

    @field_validator("compression", mode="before")
    @classmethod
    def _codec(cls, value: Any) -> Any:
        if value is None:
            return "none"
        if isinstance(value, str) and value.lower() in _CODECS:
            return value.lower()
        msg = f"expected 'none', 'lz4' or 'zstd'; got {value!r}"
        raise ValueError(msg)

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)

    @property
    def suffix(self) -> str:
        """The finalized files' suffix: ``.arrow`` (file format) or ``.arrows`` (stream)."""
        return ".arrow" if self.format == "file" else ".arrows"

    @property
    def ipc_compression(self) -> str | None:
        """The codec as pyarrow's ``IpcWriteOptions`` takes it (``None`` for none)."""
        return None if self.compression == "none" else self.compression


class ArrowIPCSourceConfig(ConnectorConfig):
    """The settings of an :class:`~thalweg_bytewax.connectors.arrow_ipc.ArrowIPCSource`."""

    component: ClassVar[str] = "arrow ipc source"

    path: str = Field(min_length=1)
    """A directory (its `.arrow` and `.arrows` files, recursively), a glob (`**` spans
    directories) or one file; local, a URI, or a path on the source's `filesystem`."""
    follow: bool = False
    """Keep the flow running and re-list the directory every `follow_interval` (files
    finalized since the start are logged, and read when the flow restarts)."""
    follow_interval: Duration = Field(default=DEFAULT_FOLLOW_INTERVAL, gt=timedelta(0))
    """How long between listings when following (seconds, or ISO-8601)."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return as_location(value, "a directory, glob or file")

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)
