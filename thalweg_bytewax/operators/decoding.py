"""``decode``: keyed RawBatches into decoded batches plus a dead-letter stream.

Each RawBatch's payload column goes through the codec's columnar ``decode_batch`` in
one call (headers included, so header framing works). The rows that decode become
``ok`` batches: the payload's own columns followed by the metadata columns the policy
selects, taken columnar from the RawBatch. The rows that do not become DLQ batches
(:func:`thalweg_bytewax.lanes.dlq.dlq_schema`) with reason ``decode``, the codec's message,
the locator, the record id and the raw key and value bytes. Bad data never stops the
flow; an unreachable schema registry does, loudly, because an outage is not bad data.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import bytewax.operators as op
import numpy as np
import pyarrow as pa
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream

from thalweg_bytewax.codecs.base import Codec, DecodeFailure, FailureKind
from thalweg_bytewax.coverage.input_span import input_span_metadata
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.lanes.dlq import RejectReason, dlq_batch_from_rows
from thalweg_bytewax.observability.gate import observe_step
from thalweg_bytewax.operators._first_rejects import FirstRejects
from thalweg_bytewax.operators._outcome import NOTHING, BatchOutcome, split_outcomes
from thalweg_bytewax.records.metadata import (
    DEFAULT_PREFIX,
    MetadataColumns,
    MetadataPolicy,
    metadata_columns,
)
from thalweg_bytewax.system.threads import SharedPool

__all__ = ["DecodeOut", "decode"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeOut:
    """The streams of :func:`decode`, both keyed like the input (source partition).

    Attributes:
        ok: Decoded batches: payload columns, then the metadata columns the policy
            selects. One batch per input batch with at least one good record.
        rejected: DLQ batches (:func:`thalweg_bytewax.lanes.dlq.dlq_schema`) of the records
            that failed to decode, reason ``decode``. One batch per input batch with at
            least one bad record.
    """

    ok: KeyedStream[pa.RecordBatch]
    rejected: KeyedStream[pa.RecordBatch]


class _Decoder:
    """The per-batch work of :func:`decode`; shared by the workers of a process."""

    def __init__(
        self, step_id: str, codec: Codec, policy: MetadataPolicy, columns: MetadataColumns
    ) -> None:
        self.step_id = step_id
        self.codec = codec
        self.columns = columns
        raw_schema = columns.raw_schema
        self.meta_fields = [raw_schema.field(n) for n in columns.policy_columns(policy)]
        self.meta_names = [f.name for f in self.meta_fields]
        self._first_rejects = FirstRejects(logger, "decode", "undecodable record(s)")

    def run_many(self, items: list[tuple[str, pa.RecordBatch]]) -> list[tuple[str, BatchOutcome]]:
        """Decode the batches Bytewax hands over at once, in order.

        With a codec that declares ``concurrent_batches`` (its columnar work releases
        the GIL and it keeps no state between batches), several batches decode on a
        shared thread pool; otherwise one after another.
        """
        # `is True`: a codec that defines it as a method does not opt in by accident.
        if len(items) > 1 and getattr(self.codec, "concurrent_batches", False) is True:
            decoded = list(_pool().map(self.run, [batch for _, batch in items]))
            return [(key, d) for (key, _), d in zip(items, decoded, strict=True)]
        return [(key, self.run(batch)) for key, batch in items]

    def run(self, raw: pa.RecordBatch) -> BatchOutcome:
        obs = observe_step("decode", self.step_id, raw)  # None unless observability is on
        decoded = self._run(raw)
        if obs is None:
            return decoded
        return BatchOutcome(obs.finish(decoded.ok, decoded.rejected), decoded.rejected)

    def _run(self, raw: pa.RecordBatch) -> BatchOutcome:
        n = raw.num_rows
        if n == 0:
            return NOTHING
        cols = self.columns
        result = self.codec.decode_batch(
            raw.column(cols.source_value), headers=raw.column(cols.source_headers)
        )
        payload, errors = result.batch, result.errors
        self._check_indices(errors, n)
        shadowed = [name for name in payload.schema.names if cols.is_reserved(name)]
        if shadowed and payload.num_rows:
            # The codecs report this per schema when their prefix is ours; a codec
            # configured with another prefix must still never shadow a metadata column.
            errors = self._reserved(shadowed, n, errors)
            payload = payload.slice(0, 0)
        ok_idx = _complement(errors, n)
        if payload.num_rows != len(ok_idx):
            msg = (
                f"decode `{self.step_id}`: codec `{self.codec.name}` returned "
                f"{payload.num_rows} rows and {len(errors)} failures for {n} payloads; "
                "expected them to add up (a codec bug)"
            )
            raise SchemaError(msg)
        return BatchOutcome(self._ok(raw, payload, ok_idx), self._rejected(raw, errors))

    def _check_indices(self, errors: list[DecodeFailure], n: int) -> None:
        """Each failure names a distinct row of the batch, or the codec is broken."""
        if not errors:
            return
        idx = np.fromiter((e.index for e in errors), dtype=np.int64, count=len(errors))
        outside = idx[(idx < 0) | (idx >= n)]
        if len(outside):
            problem = f"a failure at row {outside[0]}, outside the batch of {n} payloads"
        else:
            seen, counts = np.unique(idx, return_counts=True)
            if (counts == 1).all():
                return
            twice = np.flatnonzero(counts > 1)[0]
            problem = f"row {seen[twice]} as failed {counts[twice]} times"
        msg = (
            f"decode `{self.step_id}`: codec `{self.codec.name}` reported {problem}; "
            "expected one failure per bad row, indexed from 0 (a codec bug)"
        )
        raise SchemaError(msg)

    def _reserved(
        self, shadowed: list[str], n: int, errors: list[DecodeFailure]
    ) -> list[DecodeFailure]:
        names = ", ".join(f"`{s}`" for s in shadowed)
        msg = (
            f"{self.codec.name}: payload field(s) {names} fall under the reserved metadata "
            f"prefix `{self.columns.prefix}`; rename them in the schema or configure "
            "another prefix"
        )
        failed = {e.index for e in errors}
        extra = [DecodeFailure(i, FailureKind.RESERVED_FIELD, msg) for i in range(n)]
        merged = errors + [e for e in extra if e.index not in failed]
        return sorted(merged, key=lambda e: e.index)

    def _ok(
        self, raw: pa.RecordBatch, payload: pa.RecordBatch, idx: np.ndarray
    ) -> pa.RecordBatch | None:
        if len(idx) == 0:
            return None
        meta = raw.select(self.meta_names)
        span = None
        if len(idx) != raw.num_rows:
            meta = meta.take(pa.array(idx, pa.int64()))
            # Rows went to the DLQ: the batch stands for its whole input, so a sink
            # covers the rejected offsets too (thalweg_bytewax.coverage.input_span).
            span = input_span_metadata(raw, self.columns)
        return pa.RecordBatch.from_arrays(
            [*payload.columns, *meta.columns],
            schema=pa.schema([*payload.schema, *self.meta_fields], metadata=span),
        )

    def _rejected(self, raw: pa.RecordBatch, errors: list[DecodeFailure]) -> pa.RecordBatch | None:
        if not errors:
            return None
        cols = self.columns
        # Only failed rows reach this: a per-row loop here is bounded by the rejects.
        idx = pa.array([e.index for e in errors], pa.int64())
        topics = raw.column(cols.source_topic).take(idx).to_pylist()
        parts = raw.column(cols.source_partition).take(idx).to_pylist()
        offsets = raw.column(cols.source_offset).take(idx).to_pylist()
        messages = [
            f"{self.codec.name} decode failed at `{t}:{p}@{o}` ({e.kind}): {e.message}"
            for e, t, p, o in zip(errors, topics, parts, offsets, strict=True)
        ]
        self._first_rejects.log(self.step_id, messages[0])
        return dlq_batch_from_rows(
            raw,
            idx,
            reason=RejectReason.DECODE,
            step_id=self.step_id,
            messages=messages,
            columns=cols,
        )


_pool = SharedPool(min(4, os.cpu_count() or 1), "twg-decode")
"""The process's decode threads, shared by every decode step and worker."""


def _complement(errors: list[DecodeFailure], n: int) -> np.ndarray:
    if not errors:
        return np.arange(n, dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    keep[np.fromiter((e.index for e in errors), dtype=np.int64, count=len(errors))] = False
    return np.flatnonzero(keep)


@operator
def decode(
    step_id: str,
    up: KeyedStream[pa.RecordBatch],
    codec: Codec,
    *,
    metadata: MetadataPolicy | str = MetadataPolicy.LOCATOR,
    metadata_prefix: str = DEFAULT_PREFIX,
) -> DecodeOut:
    """Decode the payloads of keyed RawBatches with a codec, columnar.

    The key (the source partition, e.g. ``"orders:3"``) is kept on both outputs, so
    epoch-durable sinks such as ``ParquetSink`` consume them directly. Good records
    come out in input order. A record that fails — tombstone, bad framing, unknown
    schema id, corrupt body, a record that does not fit its schema, or a payload field
    under the reserved metadata prefix — goes to ``rejected`` with reason ``decode``;
    the flow continues and the good records around it are decoded. An unreachable
    schema registry raises and stops the flow (``RegistryUnavailableError``). Empty
    batches produce nothing. The codec logs each resolved Arrow schema once, at first
    sight.

    ```python
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow

    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.codecs import AvroCodec
    from thalweg_bytewax.connectors.kafka import KafkaSource
    from thalweg_bytewax.connectors.parquet import ParquetSink

    flow = Dataflow("orders")
    raw = op.input("in", flow, KafkaSource("localhost:9092", ["orders"]))
    orders = twg.decode("decode", raw, AvroCodec("http://registry:8081"))
    op.output("orders", orders.ok, ParquetSink("lake/orders"))
    op.output("dlq", orders.rejected, ParquetSink("lake/dlq"))
    ```

    Args:
        step_id: Unique step id.
        up: Keyed RawBatches, as a source emits them.
        codec: An ``AvroCodec``, ``ProtobufCodec``, ``JsonCodec`` or any object with the
            codec protocol (:class:`thalweg_bytewax.codecs.Codec`).
        metadata: Which metadata columns decoded batches keep: ``"none"``,
            ``"locator"`` (topic, partition, offset, record id) or ``"all"`` (every
            metadata column but the raw key and value bytes).
        metadata_prefix: Prefix of the metadata columns.

    Returns:
        ``DecodeOut(ok, rejected)``.

    Raises:
        ConfigError: At build time, for an unknown metadata policy or prefix, or a codec
            without ``decode_batch``.
    """
    columns = metadata_columns(metadata_prefix, f"decode `{step_id}`")
    try:
        policy = MetadataPolicy(metadata)
    except ValueError as exc:
        msg = f"decode `{step_id}`: expected metadata 'none', 'locator' or 'all'; got {metadata!r}"
        raise ConfigError(msg) from exc
    if not callable(getattr(codec, "decode_batch", None)):
        msg = (
            f"decode `{step_id}`: expected a codec with `decode_batch` (AvroCodec, "
            f"ProtobufCodec, JsonCodec); got {type(codec).__name__}"
        )
        raise ConfigError(msg)
    decoder = _Decoder(step_id, codec, policy, columns)
    logger.info("decode %s: codec %s, metadata policy %s", step_id, codec.name, policy)
    decoded = op.flat_map_batch("decode_batch", up, decoder.run_many)
    ok, rejected = split_outcomes(decoded)
    return DecodeOut(ok=ok, rejected=rejected)
