"""``ParquetSinkConfig``: the settings of a Parquet lane, one frozen model.

:class:`~thalweg_bytewax.connectors.parquet.ParquetSink` builds it from its keywords, a
pipeline builds it from a ``[sinks.<name>]`` table with ``kind = "parquet"``, and the
sink's partitions read only it. The two arguments that are objects rather than settings
(a ``filesystem`` and a ``coverage_store`` object) stay the sink's own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from thalweg_bytewax.config import ConnectorConfig
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataColumns

from .._settings import MetadataPrefix, as_location

__all__ = [
    "CODECS",
    "DEFAULT_BUFFER_BYTES",
    "DEFAULT_MAX_FILE_ROWS",
    "DEFAULT_ROW_GROUP_BYTES",
    "DEFAULT_ROW_GROUP_ROWS",
    "ParquetSinkConfig",
]

# Polls are buffered per topic-partition until either bound, then written as one row
# group by a background thread. 4 MiB (~12k raw orders) keeps row groups in flight
# while the flow polls on: measured on the raw-lane benchmark, 8 MiB and more left most
# encoding to the epoch's snapshot, where nothing else runs (~10% slower), while 512 KiB
# made row groups too small to scan well (docs/benchmarks.md "raw lane").
DEFAULT_ROW_GROUP_ROWS = 128 * 1024
DEFAULT_ROW_GROUP_BYTES = 4 * 1024 * 1024
# All the sink's buffers on one worker: up to 4 topic-partitions fill their 4 MiB row
# groups; with more, the largest buffer is written early (16 partitions: ~1 MiB row
# groups), so the memory held until the snapshot does not grow with the partitions a
# worker reads. Measured on the decode memory benchmark (16 partitions of plain Avro
# orders, 2 alternated runs each): 16 MiB against 64, peak RSS 383-384 against 430-438
# MB at the same CPU a record (5.80-5.82 against 5.85-6.31 us).
DEFAULT_BUFFER_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_FILE_ROWS = 4 * 1024 * 1024
CODECS = frozenset({"none", "snappy", "gzip", "brotli", "lz4", "lz4_raw", "zstd"})
"""The codecs Parquet files can carry (pyarrow names, any case)."""


class ParquetSinkConfig(ConnectorConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.parquet.ParquetSink`.

    Example:
        >>> ParquetSinkConfig(path="lake/raw", compression="snappy").shards
        16
    """

    component: ClassVar[str] = "parquet sink"

    path: str = Field(min_length=1)
    """The lane's directory: a local path, a URI (`file://`, `s3://`, ...) or a path on the
    sink's `filesystem`."""
    shards: int = Field(default=16, ge=1)
    """Sink partitions the topic-partitions are spread over; it bounds the sink's
    parallelism across workers. Keep it fixed for a lane."""
    compression: str = "zstd"
    """The Parquet compression codec: none, snappy, gzip, brotli, lz4, lz4_raw or zstd."""
    row_group_rows: int = Field(default=DEFAULT_ROW_GROUP_ROWS, ge=1)
    """Rows buffered per topic-partition before a row group is written."""
    row_group_bytes: int = Field(default=DEFAULT_ROW_GROUP_BYTES, ge=1)
    """Bytes buffered per topic-partition before a row group is written."""
    buffer_bytes: int = Field(default=DEFAULT_BUFFER_BYTES, ge=1)
    """Bytes buffered by all of the sink's partitions on one worker: beyond it the largest
    buffer is written as a (smaller) row group."""
    max_file_rows: int = Field(default=DEFAULT_MAX_FILE_ROWS, ge=1)
    """Rows after which a file is closed (it becomes visible at the epoch's snapshot)."""
    metadata_prefix: MetadataPrefix = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
    allow_widening: bool = False
    """Let a batch widen a column losslessly (int32 to int64, float32 to float64, a wider
    decimal) instead of failing the epoch."""

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return as_location(value, "a non-empty directory, URI or path on `filesystem`")

    @field_validator("compression")
    @classmethod
    def _codec(cls, value: str) -> str:
        if value.lower() not in CODECS:
            msg = f"expected one of {', '.join(sorted(CODECS))}; got {value!r}"
            raise ValueError(msg)
        return value

    @property
    def columns(self) -> MetadataColumns:
        """The metadata columns under :attr:`metadata_prefix`."""
        return MetadataColumns(self.metadata_prefix)
