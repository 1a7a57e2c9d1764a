"""``FileSourceConfig``: every setting of a ``FileSource``, in one frozen model.

The same object comes from a ``FileSource``'s keywords, from a pipeline's ``[source]``
table with ``kind = "files"``, and from ``THALWEG_SOURCE__*`` variables and ``--set
source.*`` overrides. The rows' schema is not a setting: an Arrow schema or a data
contract is an object, given to ``FileSource`` beside the configuration (a pipeline
passes its contract's or codec's); ``schema = "infer"`` is the one schema a file can
name.

Credentials are secrets: an entry of ``storage_options`` whose key names one (``secret``,
``token``, ``password``, ``s3.secret-access-key``, ...) is a
:class:`~thalweg_bytewax.config.SecretRef`, shown as its reference or ``***`` and resolved
only when a file system is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from thalweg_bytewax.config import ConnectorConfig, SecretRef, type_secrets
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataPolicy, metadata_columns

from ._limits import DEFAULT_LIMITS, FileLimits, XmlLimits

__all__ = ["DEFAULT_BATCH_ROWS", "FileFormat", "FileSourceConfig", "StorageOptions"]

# Rows per emitted batch at most: pyarrow's Parquet reader default, and large enough
# that the per-batch cost of the operators downstream vanishes (docs/benchmarks.md).
DEFAULT_BATCH_ROWS = 65_536


class FileFormat(StrEnum):
    """The formats :class:`~thalweg_bytewax.connectors.files.FileSource` reads."""

    PARQUET = "parquet"
    CSV = "csv"
    NDJSON = "ndjson"
    AVRO = "avro"
    IPC = "ipc"
    """Arrow IPC, file or stream format (``.arrow``, ``.feather``)."""
    EXCEL = "excel"
    """xlsx, xlsm, xls, xlsb, ods through python-calamine (extra ``files``)."""
    XML = "xml"
    """Records at a ``record_path`` through lxml (extra ``files``)."""


def _entries(value: Any) -> Any:
    """One path (text or ``os.PathLike``) as a list; each ``os.PathLike`` as text."""
    if isinstance(value, str | os.PathLike):
        value = [value]
    if isinstance(value, list | tuple):
        return [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
    return value


def _non_empty(paths: list[str]) -> list[str]:
    if not all(paths):
        msg = "expected paths, globs or URLs; got an empty one"
        raise ValueError(msg)
    return paths


StorageOptions = Annotated[
    dict[str, SecretRef | str | bool | int | float | list[Any] | dict[str, Any]],
    AfterValidator(type_secrets),
]
"""fsspec options for URLs: an entry whose key names a credential is a ``SecretRef``."""


def resolve_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with their secrets resolved: call it where a file system is opened.

    Raises:
        ConfigError: Naming a secret reference that does not resolve.
    """
    return {k: v.resolve() if isinstance(v, SecretRef) else v for k, v in options.items()}


class FileSourceConfig(ConnectorConfig):
    """The settings of a :class:`~thalweg_bytewax.connectors.files.FileSource`.

    Build it from keywords (``FileSourceConfig(paths=["data/*.csv"], infer_schema=True)``),
    load it as a pipeline's ``[source]`` (``kind = "files"``), or let ``FileSource`` build
    it from its own keywords; ``FileSource.from_config`` takes it whole.
    """

    component: ClassVar[str] = "file source"

    kind: Literal["files"] = "files"
    """The source kind, as a pipeline's `[source]` table names it."""
    paths: Annotated[
        list[str], BeforeValidator(_entries), Field(min_length=1), AfterValidator(_non_empty)
    ]
    """Paths, globs (`data/**/*.csv`) or fsspec URLs; one partition per file, in sorted
    order. A URL's credentials are redacted wherever the file is named."""
    format: FileFormat | None = None
    """parquet, csv, ndjson, avro, ipc, excel or xml; unset = by each file's suffix (CSV
    and NDJSON also compressed: `.csv.gz`)."""
    infer_schema: bool = False
    """Infer the schema of formats without one (CSV, NDJSON, Excel, XML), logged; false =
    the Arrow schema or contract given beside this configuration (`schema="infer"` in
    Python)."""
    batch_rows: int = Field(default=DEFAULT_BATCH_ROWS, ge=1)
    """Rows per emitted batch at most (Avro: one batch per block)."""
    metadata: MetadataPolicy = MetadataPolicy.LOCATOR
    """The metadata columns next to the payload: none, locator or all."""
    metadata_prefix: str = DEFAULT_PREFIX
    """The prefix of the metadata columns."""
    sheet: str | int = 0
    """excel: the sheet, by index or name."""
    record_path: str | None = None
    """xml: the path of the record elements, e.g. `/orders/order`."""
    xml_limits: XmlLimits = Field(default_factory=XmlLimits)
    """xml: the reader's bounds (depth, record size, fields, ...)."""
    storage_options: StorageOptions = Field(default_factory=dict)
    """fsspec options for URLs; an entry whose key names a credential (`secret`, `token`,
    ...) is a secret: write a reference (`${env:S3_SECRET}`)."""
    limits: FileLimits = DEFAULT_LIMITS
    """Bounds on what one file may make the source allocate (line length, decompressed
    bytes, Avro blocks, Excel cells, ...)."""

    @model_validator(mode="after")
    def _checked(self) -> Self:
        metadata_columns(self.metadata_prefix, "file source")
        if self.format is FileFormat.XML and not self.record_path:
            msg = "file source: XML expected `record_path` (e.g. '/orders/order'); got none"
            raise ConfigError(msg)
        return self
