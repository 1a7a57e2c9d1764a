"""The DLQ as Kafka records: rejects to a topic, with the error headers Kafka Connect uses.

:class:`DlqEncoder` turns DLQ batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`, the one
reject shape of every stage) into one Kafka record per reject for a
:class:`~thalweg_bytewax.connectors.kafka.KafkaSink`, so rejects can go to Kafka
instead of, or as well as, a Parquet DLQ lane::

    from thalweg_bytewax.connectors.kafka import KafkaSink
    from thalweg_bytewax.connectors.kafka.dlq import DlqEncoder

    op.output("dlq_kafka", decoded.rejected, KafkaSink(brokers, "orders.dlq", encoder=DlqEncoder()))

The record's value is the original payload with its envelope intact (or, for a reject
that no longer carries it, the decoded row as JSON), its key the original key, and its
headers say what went wrong — Kafka Connect's names first, so tools built for Connect's
dead-letter topics read them, then ours:

=========================================  ==========================================
``__connect.errors.topic``                 source topic
``__connect.errors.partition``             source partition (decimal)
``__connect.errors.offset``                source offset (decimal)
``__connect.errors.exception.class.name``  the error class for the reason code
                                           (:data:`ERROR_CLASS_BY_REASON`)
``__connect.errors.exception.message``     the reject's message
``__dlq.errors.reason``                    reason code (``decode``, ``contract``, ...)
``__dlq.errors.rules``                     failed rule ids, comma-separated
``__dlq.errors.step``                      the step that rejected the record
``__dlq.errors.cluster``                   source cluster id, where known
``__dlq.errors.record_id``                 the 16-byte record id
``__dlq.errors.rejected_at``               when (ISO 8601, UTC)
``__dlq.errors.value``                     ``raw``, ``row_json`` or ``none``
``__dlq.errors.row_json``                  the decoded row as JSON, next to a raw value
=========================================  ==========================================

The original record's headers, where the DLQ batch carries them
(``<prefix>source_headers``), follow in their order. The sink adds its own locator
header (``_twg.locator``) in front, which makes the DLQ topic exactly-once too.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from thalweg_bytewax.codecs.base import EncodedValues, EncodeError
from thalweg_bytewax.lanes.dlq import (
    DLQ_MESSAGE,
    DLQ_REASON,
    DLQ_REJECTED_AT,
    DLQ_ROW_JSON,
    DLQ_RULES,
    DLQ_STEP_ID,
    RejectReason,
)
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX, metadata_columns

__all__ = [
    "CONNECT_CLASS",
    "CONNECT_MESSAGE",
    "CONNECT_OFFSET",
    "CONNECT_PARTITION",
    "CONNECT_TOPIC",
    "DLQ_HEADER_PREFIX",
    "ERROR_CLASS_BY_REASON",
    "DlqEncoder",
]

CONNECT_TOPIC = "__connect.errors.topic"
"""Kafka Connect's header: the topic of the failed record."""
CONNECT_PARTITION = "__connect.errors.partition"
"""Kafka Connect's header: its partition."""
CONNECT_OFFSET = "__connect.errors.offset"
"""Kafka Connect's header: its offset."""
CONNECT_CLASS = "__connect.errors.exception.class.name"
"""Kafka Connect's header: the class of the error."""
CONNECT_MESSAGE = "__connect.errors.exception.message"
"""Kafka Connect's header: the error message."""
DLQ_HEADER_PREFIX = "__dlq.errors."
"""Prefix of thalweg's own DLQ headers."""

ERROR_CLASS_BY_REASON: Mapping[RejectReason, str] = MappingProxyType(
    {
        RejectReason.DECODE: "thalweg_bytewax.DecodeError",
        RejectReason.CONTRACT: "thalweg_bytewax.ContractViolation",
        RejectReason.DQ: "thalweg_bytewax.QualityRuleViolation",
        # A sink's write or a sidecar's call, retried until the retries ran out.
        RejectReason.RETRY_EXHAUSTED: "thalweg_bytewax.RetriesExhausted",
        RejectReason.UDF: "thalweg_bytewax.WasmUdfError",
    }
)
"""The error class Connect's header names, per reason code: one for every
:class:`~thalweg_bytewax.lanes.dlq.RejectReason`."""

_UNKNOWN_REASON_CLASS = "thalweg_bytewax.ThalwegError"
"""The class for a reason code this version does not know (a DLQ batch written by a
newer one): the reason itself is still in ``__dlq.errors.reason``."""


def _error_class(reason: str) -> bytes:
    try:
        return ERROR_CLASS_BY_REASON[RejectReason(reason)].encode()
    except ValueError:
        return _UNKNOWN_REASON_CLASS.encode()


def _text(value: Any) -> bytes | None:
    return None if value is None else str(value).encode("utf-8")


class DlqEncoder:
    """Encode DLQ batches as Kafka records: original bytes, Connect-style error headers.

    Use it as the ``encoder`` of a :class:`~thalweg_bytewax.connectors.kafka.KafkaSink`
    fed with a DLQ stream (``decode(...).rejected``, ``validate(...).rejected``).

    Args:
        metadata_prefix: Prefix of the metadata columns of the DLQ batches.

    Raises:
        ConfigError: When the prefix is not a safe identifier.
    """

    def __init__(self, metadata_prefix: str = DEFAULT_PREFIX) -> None:
        self._columns = metadata_columns(metadata_prefix, "dlq encoder")

    @property
    def name(self) -> str:
        """``dlq``."""
        return "dlq"

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:
        """One record per reject: the original value, the error headers.

        Raises:
            EncodeError: When the batch lacks the DLQ columns.
        """
        cols = self._columns
        names = set(batch.schema.names)
        for required in (DLQ_REASON, DLQ_MESSAGE, DLQ_STEP_ID):
            if required not in names:
                msg = (
                    f"dlq encoder: batches for `{topic}` need the DLQ column `{required}`; "
                    f"got columns {batch.schema.names}; feed it a DLQ stream "
                    f"(`thalweg_bytewax.lanes.dlq.dlq_schema`)"
                )
                raise EncodeError(msg, column=required)
        n = batch.num_rows

        def column(name: str) -> list[Any]:
            return batch.column(name).to_pylist() if name in names else [None] * n

        raw = column(cols.source_value)
        row_json = column(DLQ_ROW_JSON)
        reason, message, step = column(DLQ_REASON), column(DLQ_MESSAGE), column(DLQ_STEP_ID)
        rules, at = column(DLQ_RULES), column(DLQ_REJECTED_AT)
        src_topic, src_part = column(cols.source_topic), column(cols.source_partition)
        src_off, cluster = column(cols.source_offset), column(cols.source_cluster)
        rid, original = column(cols.record_id), column(cols.source_headers)
        values: list[bytes | None] = []
        headers: list[list[tuple[str, bytes]]] = []
        p = DLQ_HEADER_PREFIX
        for i in range(n):
            row: list[tuple[str, Any]] = [
                (CONNECT_TOPIC, _text(src_topic[i])),
                (CONNECT_PARTITION, _text(src_part[i])),
                (CONNECT_OFFSET, _text(src_off[i])),
                (CONNECT_CLASS, _error_class(reason[i])),
                (CONNECT_MESSAGE, _text(message[i])),
                (f"{p}reason", _text(reason[i])),
                (f"{p}rules", ",".join(rules[i] or ()).encode("utf-8")),
                (f"{p}step", _text(step[i])),
            ]
            if cluster[i] is not None:
                row.append((f"{p}cluster", _text(cluster[i])))
            if rid[i] is not None:
                row.append((f"{p}record_id", rid[i]))
            if at[i] is not None:
                row.append((f"{p}rejected_at", at[i].isoformat().encode("ascii")))
            if raw[i] is not None:
                values.append(raw[i])
                row.append((f"{p}value", b"raw"))
                if row_json[i] is not None:
                    row.append((f"{p}row_json", _text(row_json[i])))
            elif row_json[i] is not None:
                values.append(_text(row_json[i]))
                row.append((f"{p}value", b"row_json"))
            else:
                values.append(None)
                row.append((f"{p}value", b"none"))
            # A reject without a locator has no Connect locator headers; the original
            # headers follow as they were, null values kept.
            out = [(k, v) for k, v in row if v is not None]
            out.extend((h["key"], h["value"]) for h in original[i] or ())
            headers.append(out)
        return EncodedValues(pa.array(values, pa.binary()), headers)
