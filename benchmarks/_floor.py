"""The floor of the decode flow: the parts its job cannot skip, each measured alone.

Run as children of ``decode_e2e.py`` (kind ``floor``) on the same topics as the flows,
at 1x and 2x the records, so each part's marginal CPU per record comes out of the same
run as the flows' (the difference of the two sizes cancels start-up):

* ``floor-<fmt>-consume`` — librdkafka's fetch and decompression through the native
  batch consume, with the Kafka source's own settings and budgets, polled round-robin
  over the partitions as a worker polls them, and nothing else: no RawBatch is built.
  Its figure is the whole process's CPU, as for the flows.
* ``floor-<fmt>-parts`` — reads the same records first (untimed: the native consume
  into RawBatches, as the source builds them), closes the consumers, then times each
  remaining part alone with the process's CPU clock (all its threads):

  - ``parse:<decoder>`` — the values of each polled batch parsed by a batch decoder
    into Arrow: JSON with thalweg's native reader (``JsonCodec.decode_batch``) and with
    ``pyarrow.json.read_json`` (explicit schema); Avro with ``AvroCodec.decode_batch``
    (polars plus the exactness checks) and with ``polars.read_avro`` of the same bodies
    in one container block (frame stripped, no checks). The floor takes the cheapest;
  - ``ids`` — the record ids, SHA-256 of each record's source and payload
    (``record_ids_array``, one native call a batch);
  - ``write:<setting>`` — the decoded table (payload and locator columns, what the flow's
    decoded sink receives) written per source partition in row groups cut as
    ``ParquetSink`` cuts them (4 MiB or 128k rows buffered), to files fsynced at the end,
    with the sink's options (``zstd``; ``column_options``) and with the alternatives
    ``zstd`` level -1 and ``lz4``, in turn.

The sum of the cheapest parse, the ids, the sink's write and the consume is the floor.
"""

from __future__ import annotations

import gc
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROW_GROUP_BYTES = 4 * 1024 * 1024
_ROW_GROUP_ROWS = 128 * 1024


def _source(bootstrap: str, topics: list[str]) -> Any:
    from thalweg_bytewax.connectors.kafka import KafkaSource

    return KafkaSource([bootstrap], topics, tail=False)


def _consumers(bootstrap: str, topics: list[str]) -> tuple[Any, list[tuple[str, int, Any, int]]]:
    """The native consumers of every partition, as the source opens them, with their ends.

    The process first turns transparent huge pages off, as a flow's process does when it
    builds its first partition: the parts run on the same memory as the flow's.
    """
    from thalweg_bytewax.connectors.kafka._native import _load, native_settings
    from thalweg_bytewax.system.huge_pages import limit_huge_pages

    limit_huge_pages()

    module, why = _load()
    if module is None:
        raise SystemExit(f"the native consume cannot run: {why}")
    config = _source(bootstrap, topics).config
    parts = [(t, p) for t in topics for p in range(4)]
    settings = native_settings(config.consumer_config(len(parts)))
    from confluent_kafka import Consumer, TopicPartition

    lister = Consumer({"bootstrap.servers": bootstrap, "group.id": "floor"})
    try:  # the ends, as the source's listing reads them
        ends = [lister.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1] for tp in parts]
    finally:
        lister.close()
    client = module.Client(settings)
    out = []
    for (topic, partition), high in zip(parts, ends, strict=True):
        consumer = module.Consumer(client)
        consumer.assign(topic, partition, 0, -1)
        out.append((topic, partition, consumer, int(high)))
    return config, out


def _read(
    bootstrap: str, topics: list[str], keep: Callable[[str, int, tuple[Any, ...]], None]
) -> int:
    """Read every partition to its end with the source's budgets; ``keep`` each batch."""
    config, consumers = _consumers(bootstrap, topics)
    left = {(t, p): high for t, p, _, high in consumers}
    got = 0
    avg = 0.0
    deadline = time.monotonic() + 300
    try:
        while left and time.monotonic() < deadline:
            before = got
            for topic, partition, consumer, _ in consumers:
                if (topic, partition) not in left:
                    continue
                budget = config.batch_size
                if avg > 0:
                    budget = max(1, min(budget, int(config.max_batch_bytes / avg)))
                out = consumer.consume(budget, config.max_batch_bytes)
                n = out[0]
                if n:
                    got += n
                    avg = len(out[11]) / n
                    keep(topic, partition, out)
                if consumer.position(topic, partition) >= left[(topic, partition)]:
                    del left[(topic, partition)]
            if got == before:
                time.sleep(0.001)
    finally:
        for _, _, consumer, _ in consumers:
            consumer.close()
    return got


def floor_consume(bootstrap: str, topics: list[str], expected: int) -> dict[str, float]:
    """The native batch consume of every record and nothing else (whole process)."""
    got = _read(bootstrap, topics, lambda _t, _p, _out: None)
    if got != expected:
        raise SystemExit(f"floor consume: read {got} of {expected} records")
    return {"records": got}


def _decoders(shape: Any, fmt: str, out: Path) -> dict[str, Callable[[Any], Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.registry import DirectorySchemaSource

    if fmt == "json":
        import pyarrow.json as pj

        codec = JsonCodec(shape.json_schema)
        # The explicit schema is the codec's own (what the native reader returns), so
        # both decoders build the same columns.
        schema = codec.decode_batch(pa.array([b"{}"], pa.binary())).batch.schema
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

        def pyarrow_json(values: Any) -> Any:
            # Newline-delimited, joined in one kernel call; one block for the whole batch.
            lines = pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)
            data = pc.binary_join(lines, b"\n")[0].as_buffer()
            read = pj.ReadOptions(block_size=max(data.size + 1, 1 << 20))
            return pj.read_json(pa.BufferReader(data), read_options=read, parse_options=options)

        return {
            "thalweg native reader": lambda v: codec.decode_batch(v).batch,
            "pyarrow.json": pyarrow_json,
        }
    import polars as pl

    from thalweg_bytewax.codecs._avro_ocf import ocf_block as _ocf_block
    from thalweg_bytewax.codecs._avro_ocf import ocf_header

    schemas = out / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    (schemas / f"{shape.schema_id}.avsc").write_text(json.dumps(shape.avro_schema))
    codec_ = AvroCodec(DirectorySchemaSource(schemas))
    header = ocf_header(json.dumps(shape.avro_schema))

    def polars_avro(values: Any) -> Any:
        bodies = pc.binary_slice(values, 5, 1 << 30)  # the Confluent frame: magic, schema id
        return pl.read_avro(io.BytesIO(_ocf_block(header, bodies))).to_arrow()

    return {
        "thalweg decode_batch": lambda v: codec_.decode_batch(v).batch,
        "polars.read_avro": polars_avro,
    }


def _write_options() -> dict[str, dict[str, Any]]:
    return {
        "sink's (zstd)": {"compression": "zstd"},
        "zstd level -1": {"compression": "zstd", "compression_level": -1},
        "lz4": {"compression": "lz4"},
    }


def _write(tables: dict[tuple[str, int], list[Any]], out: Path, options: dict[str, Any]) -> None:
    """Each source partition's decoded batches, cut into row groups as the sink cuts them."""
    from thalweg_bytewax.runtime.buffered_size import buffered_size

    out.mkdir(parents=True, exist_ok=True)
    for i, batches in enumerate(tables.values()):
        path = out / f"part-{i}.parquet"
        with open(path, "wb") as f:
            writer: Any = None
            buffer: list[Any] = []
            rows = size = 0
            for batch in batches:
                buffer.append(batch)
                rows += batch.num_rows
                size += buffered_size(batch)
                if rows >= _ROW_GROUP_ROWS or size >= _ROW_GROUP_BYTES:
                    writer = _row_group(writer, f, buffer, options)
                    buffer, rows, size = [], 0, 0
            if buffer:
                writer = _row_group(writer, f, buffer, options)
            writer.close()
            f.flush()
            os.fsync(f.fileno())


def _row_group(writer: Any, f: Any, buffer: list[Any], options: dict[str, Any]) -> Any:
    """Write ``buffer`` as one row group; the writer (opened on the first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from thalweg_bytewax.connectors.parquet._encoding import column_options

    table = pa.Table.from_batches(buffer)
    if writer is None:
        writer = pq.ParquetWriter(f, table.schema, **options, **column_options(table))
    writer.write_table(table, row_group_size=max(table.num_rows, 1))
    return writer


def floor_parts(
    shape: Any, fmt: str, bootstrap: str, topics: list[str], expected: int
) -> dict[str, float]:
    """The CPU seconds of each part other than the consume, each timed alone."""
    import pyarrow as pa

    from thalweg_bytewax.operators.decoding import _Decoder
    from thalweg_bytewax.records import raw_batch_from_native
    from thalweg_bytewax.records.ids import record_ids_array
    from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS, MetadataPolicy

    raws: list[tuple[str, int, Any]] = []

    def keep(topic: str, partition: int, out: tuple[Any, ...]) -> None:
        raw = raw_batch_from_native(out, topic=topic, partition=partition)
        raws.append((topic, partition, raw))

    got = _read(bootstrap, topics, keep)
    if got != expected:
        raise SystemExit(f"floor parts: read {got} of {expected} records")
    cols = DEFAULT_COLUMNS
    values = [raw.column(cols.source_value) for _, _, raw in raws]
    offsets = [raw.column(cols.source_offset) for _, _, raw in raws]
    tmp = Path(tempfile.mkdtemp(prefix="twg-bench-floor-"))
    result: dict[str, float] = {"records": got}
    try:
        decoders = _decoders(shape, fmt, tmp)
        for v in values[:2]:  # imports and first-call set-up of every decoder, untimed
            for name, decode in list(decoders.items()):
                try:
                    decode(v)
                except pa.ArrowInvalid as exc:
                    # pyarrow.json refuses a null where the codec's schema says required
                    # (the codec itself reports such rows); no figure for it then.
                    print(f"floor parse {name}: left out: {exc}", file=sys.stderr)
                    del decoders[name]
        decoder = _Decoder("decode", _codec(shape, fmt, tmp), MetadataPolicy.LOCATOR, cols)
        tables: dict[tuple[str, int], list[Any]] = {}
        for topic, partition, raw in raws:
            ok = decoder.run(raw).ok
            assert ok is not None and ok.num_rows == raw.num_rows
            tables.setdefault((topic, partition), []).append(ok)
        gc.collect()
        gc.disable()  # as the flow's decode pauses it for a batch
        try:
            for name, decode in decoders.items():
                t0 = time.process_time()
                rows = sum(decode(v).num_rows for v in values)
                result[f"parse:{name}"] = time.process_time() - t0
                if rows != got:
                    raise SystemExit(f"floor parse {name}: {rows} rows of {got}")
            t0 = time.process_time()
            for (topic, partition, _), o, v in zip(raws, offsets, values, strict=True):
                record_ids_array(None, topic, partition, o, v)
            result["ids"] = time.process_time() - t0
        finally:
            gc.enable()
        for name, options in _write_options().items():
            t0 = time.process_time()
            _write(tables, tmp / "w" / name.replace(" ", "_"), options)
            result[f"write:{name}"] = time.process_time() - t0
            shutil.rmtree(tmp / "w", ignore_errors=True)
        result["decoded_bytes"] = float(sum(t.nbytes for ts in tables.values() for t in ts))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def _codec(shape: Any, fmt: str, tmp: Path) -> Any:
    from thalweg_bytewax.codecs import AvroCodec, JsonCodec
    from thalweg_bytewax.registry import DirectorySchemaSource

    if fmt == "json":
        return JsonCodec(shape.json_schema)
    return AvroCodec(DirectorySchemaSource(tmp / "schemas"))
