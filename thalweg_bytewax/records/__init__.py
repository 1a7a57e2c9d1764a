"""Records: the record model, the metadata columns, the record id and the RawBatch.

Every source turns what it reads into RawBatches: ``pyarrow.RecordBatch`` es of exactly
:attr:`MetadataColumns.raw_schema`, the payload bytes with the envelope intact plus the
``_twg_`` metadata columns. What lives where:

- :mod:`~thalweg_bytewax.records.model`: ``Locator`` (where a record came from),
  ``RawRecord`` (one record as a Python object), ``OffsetSpan``, ``TimestampType``;
- :mod:`~thalweg_bytewax.records.metadata`: ``MetadataColumns`` (the column names under
  a prefix, the raw schema), ``MetadataPolicy`` (which columns a decoded lane keeps);
- :mod:`~thalweg_bytewax.records.ids`: the deterministic record id;
- :mod:`~thalweg_bytewax.records.batches`: RawBatches from plain columns or records,
  and back;
- :mod:`~thalweg_bytewax.records.kafka_batches`: RawBatches from Kafka messages.

Every public name of those modules is importable from here.
"""

from __future__ import annotations

from thalweg_bytewax.records.batches import (
    empty_raw_batch,
    iter_headers,
    offset_span,
    raw_batch_from_columns,
    raw_batch_from_records,
    records_from_raw_batch,
)
from thalweg_bytewax.records.ids import (
    RECORD_ID_BYTES,
    record_id,
    record_ids,
    record_ids_array,
)
from thalweg_bytewax.records.kafka_batches import (
    NativeColumns,
    raw_batch_from_messages,
    raw_batch_from_native,
)
from thalweg_bytewax.records.metadata import (
    DEFAULT_COLUMNS,
    DEFAULT_PREFIX,
    METADATA_DESCRIPTIONS,
    MetadataColumns,
    MetadataPolicy,
    metadata_columns,
)
from thalweg_bytewax.records.model import (
    Header,
    KeyedBatch,
    Locator,
    OffsetSpan,
    RawRecord,
    TimestampType,
)

__all__ = [
    "DEFAULT_COLUMNS",
    "DEFAULT_PREFIX",
    "METADATA_DESCRIPTIONS",
    "RECORD_ID_BYTES",
    "Header",
    "KeyedBatch",
    "Locator",
    "MetadataColumns",
    "MetadataPolicy",
    "NativeColumns",
    "OffsetSpan",
    "RawRecord",
    "TimestampType",
    "empty_raw_batch",
    "iter_headers",
    "metadata_columns",
    "offset_span",
    "raw_batch_from_columns",
    "raw_batch_from_messages",
    "raw_batch_from_native",
    "raw_batch_from_records",
    "record_id",
    "record_ids",
    "record_ids_array",
    "records_from_raw_batch",
]
