"""Private: an append epoch's Parquet data files, encoded on a thread while batches arrive.

An unpartitioned ``append`` sink hands its conformed rows to :class:`WriteBehind` in
chunks of ``row_group_bytes``; one worker thread encodes each chunk as a row group of
the epoch's open data file (a new file once ``target_file_bytes`` of Arrow went into
one), with pyiceberg's own Parquet writer, writer settings and file statistics (the
ones its ``table.append`` uses), except that a column of (nearly) all distinct values
is written without a dictionary (:mod:`._dictionary`: a file of several row groups
would otherwise hash it again in each one). The Parquet encode releases the GIL, so it overlaps
whatever the flow's thread does meanwhile. At the epoch's snapshot :meth:`WriteBehind.
finish` waits for the chunks, closes the open file and returns the data files; only the
commit that follows makes them visible. A failed encode raises from the next
:meth:`WriteBehind.submit` or from :meth:`WriteBehind.finish` (so at the snapshot at the
latest, which then fails and publishes nothing). A file written by a process killed
mid-encode (fault point ``iceberg.mid_encode``, after a row group, before the footer)
is in no snapshot: an orphan, removed by the table's orphan-file maintenance.
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.io.fileformat import FileFormatFactory
from pyiceberg.io.pyarrow import _to_requested_schema, pyarrow_to_schema
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import sanitize_column_names
from pyiceberg.table import DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE, TableProperties, WriteTask
from pyiceberg.table.locations import load_location_provider
from pyiceberg.typedef import Record
from pyiceberg.utils.config import Config

from thalweg_bytewax import _faults
from thalweg_bytewax.errors import SinkTerminalError

from ._dictionary import dictionary_columns

if TYPE_CHECKING:
    from pyiceberg.io import FileIO, OutputFile
    from pyiceberg.io.fileformat import FileFormatWriter
    from pyiceberg.table.metadata import TableMetadata

__all__ = ["MAX_CHUNKS_IN_FLIGHT", "PARQUET_WRITER_KWARGS", "WriteBehind", "writes_behind"]

PARQUET_WRITER_KWARGS = "_parquet_writer_kwargs"
"""The attribute of pyiceberg's Parquet writer holding its ``pq.ParquetWriter`` options."""

MAX_CHUNKS_IN_FLIGHT = 2
"""Chunks handed over and not yet encoded before :meth:`WriteBehind.submit` waits:
bounds the Arrow data an epoch holds to a few ``row_group_bytes``."""


def writes_behind(metadata: TableMetadata) -> bool:
    """Whether the table takes write-behind files: unpartitioned, Parquet data files."""
    file_format = metadata.properties.get(
        TableProperties.WRITE_FILE_FORMAT, TableProperties.WRITE_FILE_FORMAT_DEFAULT
    )
    return metadata.spec().is_unpartitioned() and FileFormat(file_format) == FileFormat.PARQUET


class _DataFileWriter:
    """One Parquet data file of an unpartitioned table, written a row group at a time.

    What pyiceberg's ``write_file`` does for one file, with ``write`` called once per
    chunk instead of once: the same file schema (field ids), writer, properties and
    statistics.
    """

    def __init__(
        self,
        metadata: TableMetadata,
        io: FileIO,
        write_uuid: uuid.UUID,
        task_id: int,
        arrow_schema: pa.Schema,
    ) -> None:
        self._metadata = metadata
        self._format = FileFormatFactory.get(FileFormat.PARQUET)
        table_schema = metadata.schema()
        self._file_schema = sanitize_column_names(table_schema)
        self._downcast = Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE) or False
        self._task_schema = pyarrow_to_schema(
            arrow_schema,
            name_mapping=table_schema.name_mapping,
            downcast_ns_timestamp_to_us=self._downcast,
            format_version=metadata.format_version,
        )
        task = WriteTask(
            write_uuid=write_uuid, task_id=task_id, schema=self._task_schema, record_batches=[]
        )
        locations = load_location_provider(
            table_location=metadata.location, table_properties=metadata.properties
        )
        self.path = locations.new_data_location(
            data_file_name=task.generate_data_file_filename(self._format.file_extension())
        )
        self._output: OutputFile = io.new_output(self.path)
        self._writer: FileFormatWriter = self._format.create_writer(
            self._output, self._file_schema, metadata.properties
        )
        self.arrow_bytes = 0  # Arrow bytes written so far

    def write(self, rows: pa.Table, nbytes: int) -> None:
        """Encode ``rows`` as the file's next row group."""
        batches = [
            _to_requested_schema(
                requested_schema=self._file_schema,
                file_schema=self._task_schema,
                batch=batch,
                downcast_ns_timestamp_to_us=self._downcast,
                include_field_ids=True,
                format_model=self._format,
            )
            for batch in rows.to_batches()
        ]
        table = pa.Table.from_batches(batches)
        if self.arrow_bytes == 0:
            self._choose_dictionaries(table)
        self._writer.write(table)
        self.arrow_bytes += nbytes

    def _choose_dictionaries(self, first: pa.Table) -> None:
        """Leave the columns of (nearly) all distinct values without a dictionary.

        Set before the file's Parquet writer opens, in the keyword arguments pyiceberg's
        writer passes to ``pq.ParquetWriter`` (its private ``_parquet_writer_kwargs``,
        pinned with pyiceberg 0.12; a test fails should it change): a writer without
        them keeps Parquet's default, a dictionary on every column.
        """
        kwargs = getattr(self._writer, PARQUET_WRITER_KWARGS, None)
        if not isinstance(kwargs, dict) or "use_dictionary" in kwargs:
            return
        keep = dictionary_columns(first)
        if keep is not None:
            kwargs["use_dictionary"] = keep

    def close(self) -> DataFile:
        """Write the footer; the data file to commit (with pyiceberg's statistics)."""
        statistics = self._writer.close()
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat.PARQUET,
            partition=Record(),
            file_size_in_bytes=len(self._output),
            sort_order_id=None,
            spec_id=self._metadata.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )

    def abandon(self) -> None:
        """Close the file without making it a data file (an orphan nothing references)."""
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001, S110 - an orphan: nothing reads it
            pass


class WriteBehind:
    """Encode an epoch's chunks into data files on one worker thread.

    The caller's thread calls :meth:`submit`, :meth:`roll`, :meth:`finish`,
    :meth:`discard` and :meth:`shutdown`; the worker alone touches the open file.

    Args:
        table_name: The table, for the worker thread's name and error messages.
    """

    def __init__(self, table_name: str) -> None:
        self._table_name = table_name
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: deque[Future[None]] = deque()
        self._open: _DataFileWriter | None = None  # the worker's open file
        self._files: list[DataFile] = []  # closed this epoch, by the worker
        self._write_uuid = uuid.uuid4()
        self._task_ids = itertools.count()

    @property
    def files_written(self) -> int:
        """Data files closed so far this epoch."""
        return len(self._files)

    def submit(
        self, metadata: TableMetadata, io: FileIO, rows: pa.Table, nbytes: int, target: int
    ) -> None:
        """Hand over a chunk of ``nbytes`` Arrow bytes; the file rolls at ``target``.

        Raises:
            SinkTerminalError: A chunk handed over earlier failed (its cause chained).
        """
        self._reap(block=len(self._in_flight) >= MAX_CHUNKS_IN_FLIGHT)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"thalweg-iceberg-{self._table_name}"
            )
        future = self._executor.submit(self._write, metadata, io, rows, nbytes, target)
        self._in_flight.append(future)

    def roll(self) -> None:
        """Close the open file after the chunks handed over (before the schema changes)."""
        if self._executor is not None:
            self._in_flight.append(self._executor.submit(self._close_open))

    def finish(self) -> list[DataFile]:
        """Wait for every chunk, close the open file: the epoch's data files.

        Raises:
            SinkTerminalError: A chunk failed (its cause chained); the files are discarded.
        """
        self.roll()
        while self._in_flight:
            self._reap(block=True)
        files, self._files = self._files, []
        return files

    def discard(self) -> None:
        """Drop the epoch's chunks and files (orphans no snapshot references)."""
        for future in self._in_flight:
            future.cancel()
        for future in self._in_flight:
            if not future.cancelled():
                future.exception()  # wait: the worker is done with the open file
        self._in_flight.clear()
        if self._open is not None:
            self._open.abandon()
            self._open = None
        self._files = []

    def shutdown(self) -> None:
        """Discard what is pending and stop the worker thread."""
        self.discard()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _reap(self, *, block: bool) -> None:
        """Raise the first failure among the chunks done; wait for the oldest if ``block``."""
        while self._in_flight and (block or self._in_flight[0].done()):
            future = self._in_flight.popleft()
            block = False
            try:
                future.result()
            except Exception as exc:
                self.discard()
                # Only the type: a storage client's text may carry what must not print.
                msg = (
                    f"iceberg sink: table `{self._table_name}`: writing a data file failed "
                    f"on the write-behind thread ({type(exc).__name__}, the cause below); "
                    f"nothing of the epoch was published and it replays on restart; check "
                    f"that the table's data location is writable and has room"
                )
                raise SinkTerminalError(msg) from exc

    # -- on the worker thread ----------------------------------------------------------

    def _write(
        self, metadata: TableMetadata, io: FileIO, rows: pa.Table, nbytes: int, target: int
    ) -> None:
        if self._open is None:
            self._open = _DataFileWriter(
                metadata, io, self._write_uuid, next(self._task_ids), rows.schema
            )
        self._open.write(rows, nbytes)
        _faults.checkpoint("iceberg.mid_encode")
        if self._open.arrow_bytes >= target:
            self._close_open()

    def _close_open(self) -> None:
        if self._open is not None:
            data_file = self._open.close()
            self._open = None
            self._files.append(data_file)
