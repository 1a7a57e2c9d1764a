"""``FileSource``: Parquet, CSV, NDJSON, Avro, Arrow IPC, Excel and XML files as batches.

Files are the unit of parallelism: one Bytewax partition per file, keyed
``"<path>:0"`` (the path is the topic, the partition is 0, the row index is the
offset), so a file's rows carry the same ``_twg_source_*`` locator and record id
columns a Kafka record does and every operator and sink downstream works unchanged.
The state of a partition is the next row index: a run resumed from a recovery
directory starts each file where its last completed epoch stopped (Parquet row groups,
IPC batches and Avro blocks before it are skipped without being read; CSV and NDJSON
blocks before it are read but not parsed). A finished file stays finished.

The source emits two kinds of keyed batches on its one output: the rows that read
well (payload columns, then the metadata columns ``metadata=`` selects) and DLQ
batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`, reason ``decode``) for the rows and
pieces of a file that did not: a ragged CSV row, an NDJSON line or Avro record that
does not decode, a value that does not fit the schema, an Avro block whose sync marker
is wrong, a truncated Parquet file, an Excel header with merged cells, malformed XML.
:func:`split_rejects` separates them. A bad row never stops the flow; the rest of its
file goes on wherever the format lets a reader pick up again.

A schema given (an Arrow schema, or a data contract: its Arrow schema) beats
inference and is faster; formats without a schema of their own (CSV, NDJSON, Excel,
XML) need one, or ``schema="infer"``, which logs the inferred schema as a WARNING.
Parquet, Arrow IPC and Avro files carry their schema; ``schema=`` casts them to it.

What a row's record id hashes: the path, partition 0, the row index and the row's raw
bytes where the format has them (the line of an NDJSON file, the body of an Avro
record — the same bytes a Kafka record would carry), otherwise no payload (so the id
stands for "row N of this file"). Those raw bytes are also what a DLQ row keeps as
``_twg_source_value``; for a CSV row it is the row's text.

Example::

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    from thalweg_bytewax.connectors.files import FileSource, split_rejects
    from thalweg_bytewax.connectors.parquet import ParquetSink

    flow = Dataflow("orders_files")
    raw = op.input("in", flow, FileSource(["data/*.csv"], schema=contract))
    files = split_rejects("split", raw)
    op.output("orders", files.ok, ParquetSink("lake/orders"))
    op.output("dlq", files.rejected, ParquetSink("lake/dlq"))
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Self

import pyarrow as pa
from bytewax.inputs import FixedPartitionedSource
from typing_extensions import override

from thalweg_bytewax._choices import parse_enum
from thalweg_bytewax._redact import redact_url
from thalweg_bytewax.codecs._contract_schema import contract_object_schema
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, MetadataPolicy, metadata_columns
from thalweg_bytewax.records.model import KeyedBatch
from thalweg_bytewax.runtime import crossings
from thalweg_bytewax.runtime.parts import announce_listing, decode_part, encode_part
from thalweg_bytewax.system.huge_pages import limit_huge_pages

from .._construct import construct
from ._avro import read_avro
from ._columnar import read_ipc, read_parquet
from ._common import INFER, Reader, ReadOptions
from ._csv import read_csv
from ._formats import SELF_DESCRIBING, suffix_format
from ._limits import DEFAULT_LIMITS, FileLimits, XmlLimits
from ._lines import read_ndjson
from ._partition import FilePartition, FileTarget
from ._paths import expand
from ._sheets import read_excel
from ._xml import read_xml
from .config import DEFAULT_BATCH_ROWS, FileFormat, FileSourceConfig, resolve_options

__all__ = ["FileSource"]

logger = logging.getLogger(__name__)


class FileSource(FixedPartitionedSource[KeyedBatch, int]):
    """Read files as keyed batches of decoded rows, plus DLQ batches for bad rows.

    Files are the unit of parallelism (one partition per file, state = the next row
    index). Exactly-once with an epoch sink and a recovery directory: a resumed run
    starts each file at the row after its last completed epoch, and the sink skips
    what it already holds.

    Args:
        paths_or_globs: File paths, globs (``data/**/*.csv``) or fsspec URLs
            (``s3://bucket/orders/*.parquet``, ``file:///data/x.csv``), one or a list.
            Expanded in sorted order when the flow starts. A URL's credentials
            (``s3://key:secret@bucket/x.csv``, ``?token=…``) are redacted wherever the
            file is named: topic column, record ids, partition keys, DLQ rows, messages.
        format: The format of every file; default: from each file's suffix. CSV and
            NDJSON files ending in ``.gz``, ``.bz2``, ``.zst`` or ``.lz4``
            (``orders.csv.gz``) are decompressed as they are read.
        schema: An Arrow schema, a data contract (its Arrow schema, for
            ``object_name``), ``"infer"`` or ``None``. CSV, NDJSON, Excel and XML need
            a schema or ``"infer"``; Parquet, IPC and Avro files bring their own, which
            ``schema`` casts to.
        object_name: With a contract, the schema object to read into.
        batch_rows: Rows per emitted batch at most (Avro: one batch per block).
        metadata: Metadata columns next to the payload: ``"none"``, ``"locator"``
            (path, partition, row index, record id) or ``"all"``.
        metadata_prefix: Prefix of the metadata columns.
        sheet: Excel: the sheet, by index or name.
        record_path: XML: the path of the record elements, e.g. ``"/orders/order"``
            (local names from the root). Repeated child elements become lists, nested
            ones structs (docs/connectors/files.md, "XML records").
        xml_limits: XML: the reader's bounds (depth, record size, fields...); a record
            past one is a DLQ row. Default: :class:`XmlLimits` defaults.
        storage_options: fsspec options for URLs (credentials stay out of messages).
        limits: Bounds on what one file may make the source allocate (line length,
            decompressed bytes, Avro block size and count, Excel cells...); default
            :data:`DEFAULT_LIMITS`. What exceeds one is a DLQ row naming the bound.

    Raises:
        ConfigError: On an unknown format, a missing schema for a format without one,
            an XML source without ``record_path``, or bad arguments.
    """

    def __init__(
        self,
        paths_or_globs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        format: FileFormat | str | None = None,  # noqa: A002 - the documented name
        schema: Any = None,
        object_name: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        metadata: MetadataPolicy | str = MetadataPolicy.LOCATOR,
        metadata_prefix: str = DEFAULT_PREFIX,
        sheet: str | int = 0,
        record_path: str | None = None,
        xml_limits: XmlLimits | None = None,
        storage_options: Mapping[str, Any] | None = None,
        limits: FileLimits | None = None,
    ) -> None:
        where = "file source"
        entries = (
            [paths_or_globs]
            if isinstance(paths_or_globs, str | os.PathLike)
            else list(paths_or_globs)
        )
        if not entries or not all(
            isinstance(e, str | os.PathLike) and os.fspath(e) for e in entries
        ):
            msg = f"{where}: `paths_or_globs` expected paths, globs or URLs; got {paths_or_globs!r}"
            raise ConfigError(msg)
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            msg = f"{where}: `batch_rows` expected an integer >= 1; got {batch_rows!r}"
            raise ConfigError(msg)
        bounds = (("xml_limits", xml_limits, XmlLimits), ("limits", limits, FileLimits))
        for name, value, kind in bounds:
            if value is not None and not isinstance(value, kind):
                msg = f"{where}: `{name}` expected a {kind.__name__}; got {type(value).__name__}"
                raise ConfigError(msg)
        values: dict[str, Any] = {
            "paths": [os.fspath(e) for e in entries],
            "format": parse_enum(FileFormat, format, where=where, argument="format")
            if format is not None
            else None,
            "infer_schema": isinstance(schema, str) and schema == INFER,
            "batch_rows": batch_rows,
            "metadata": parse_enum(MetadataPolicy, metadata, where=where, argument="metadata"),
            "metadata_prefix": metadata_prefix,
            "sheet": sheet,
            "record_path": record_path,
            "xml_limits": xml_limits or XmlLimits(),
            "storage_options": dict(storage_options or {}),
            "limits": limits or DEFAULT_LIMITS,
        }
        metadata_columns(metadata_prefix, where)  # a bad prefix named as the keyword
        self._start(FileSourceConfig.build(values, component=where), schema, object_name)

    @classmethod
    def from_config(
        cls, config: FileSourceConfig, *, schema: Any = None, object_name: str | None = None
    ) -> Self:
        """The source a :class:`FileSourceConfig` describes (a pipeline's ``[source]``).

        Args:
            config: The settings.
            schema: An Arrow schema or a data contract (its Arrow schema, for
                ``object_name``); ``None`` with ``config.infer_schema`` set infers it.
            object_name: With a contract, the schema object to read into.

        Raises:
            ConfigError: When ``config`` is not a ``FileSourceConfig``, or the schema
                is missing for a format without one.
        """
        return construct(cls, cls._start, FileSourceConfig.checked(config), schema, object_name)

    def _start(self, config: FileSourceConfig, schema: Any, object_name: str | None) -> None:
        self.config = config
        self.columns = metadata_columns(config.metadata_prefix, "file source")
        resolved = _resolve_schema(None if schema == INFER else schema, object_name)
        self._infer = config.infer_schema and resolved is None
        self.schema: pa.Schema | None = resolved if isinstance(resolved, pa.Schema) else None
        if config.format is not None:
            self._check_schema(config.format, "every file")
        if self._infer:
            logger.warning(
                "file source: schema inference asked for; each file's inferred schema is "
                "logged (pass a contract or an Arrow schema to fix it, which is faster)"
            )
        self._paths: list[str] | None = None
        self._by_name: dict[str, str] = {}

    @property
    def entries(self) -> list[str]:
        """The paths, globs and URLs as given."""
        return self.config.paths

    @property
    def format(self) -> FileFormat | None:
        """The format of every file, or ``None`` (by suffix)."""
        return self.config.format

    @property
    def batch_rows(self) -> int:
        """Rows per emitted batch at most."""
        return self.config.batch_rows

    @property
    def policy(self) -> MetadataPolicy:
        """Which metadata columns the rows carry."""
        return self.config.metadata

    def _check_schema(self, fmt: FileFormat, what: str) -> None:
        if self.schema is None and fmt not in SELF_DESCRIBING and not self._infer:
            msg = (
                f"file source: {fmt} file(s) `{what}` expected `schema=` (an Arrow schema "
                f"or a contract); got none (pass schema='infer' to infer it, logged)"
            )
            raise ConfigError(msg)

    def paths(self) -> list[str]:
        """The files the globs and paths expand to, in order (computed once).

        Raises:
            SourceError: A path (not a glob) with no file there.
        """
        if self._paths is None:
            found: list[str] = []
            options = resolve_options(self.config.storage_options)
            for entry in self.entries:
                found.extend(expand(entry, options))
            self._paths = list(dict.fromkeys(found))
            self._by_name = {redact_url(p): p for p in self._paths}
        return self._paths

    def format_of(self, path: str) -> FileFormat:
        """The format ``path`` is read as.

        Raises:
            ConfigError: When no format was given and the suffix names none.
        """
        if self.format is not None:
            return self.format
        return suffix_format(path)

    @override
    def list_parts(self) -> list[str]:
        # Keys name files without credentials: they land in the recovery store, logs
        # and every keyed batch. build_part maps them back to the URL to open.
        return announce_listing([encode_part(redact_url(p), 0) for p in self.paths()])

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> FilePartition:
        crossings.note_readers([for_part])
        limit_huge_pages()
        name, _ = decode_part(for_part)
        self.paths()
        path = self._by_name.get(name, name)
        fmt = self.format_of(path)
        self._check_schema(fmt, name)
        if fmt is FileFormat.XML and not self.config.record_path:
            msg = f"file source `{step_id}`: `{name}` is XML; expected `record_path`; got none"
            raise ConfigError(msg)
        start = resume_state or 0
        if resume_state is not None:
            logger.info("file source %s: `%s` resumes at row %s", step_id, name, start)
        target = FileTarget(path, resolve_options(self.config.storage_options))
        options = ReadOptions(self.schema, self.batch_rows, self.config.limits)
        chunks = self._reader(fmt)(target, start, options)
        meta = [self.columns.raw_schema.field(n) for n in self.columns.policy_columns(self.policy)]
        return FilePartition(step_id, for_part, path, str(fmt), chunks, self.columns, meta, start)

    def _reader(self, fmt: FileFormat) -> Reader:
        cfg = self.config
        readers: dict[FileFormat, Reader] = {
            FileFormat.PARQUET: read_parquet,
            FileFormat.CSV: read_csv,
            FileFormat.NDJSON: read_ndjson,
            FileFormat.AVRO: read_avro,
            FileFormat.IPC: read_ipc,
            FileFormat.EXCEL: partial(read_excel, sheet=cfg.sheet),
            FileFormat.XML: partial(
                read_xml, record_path=cfg.record_path or "", xml_limits=cfg.xml_limits
            ),
        }
        return readers[fmt]


def _resolve_schema(schema: Any, object_name: str | None) -> pa.Schema | str | None:
    schema = contract_object_schema(schema, object_name, "file source")
    if schema is None or isinstance(schema, pa.Schema) or schema == INFER:
        return schema
    msg = (
        f"file source: `schema` expected an Arrow schema, a data contract, 'infer' or "
        f"None; got {type(schema).__name__}"
    )
    raise ConfigError(msg)
