"""FileSource reads every format into the batches KafkaSource -> decode yields.

One dataset, written in each format, is compared with what the same records produced
as JSON and as bare Avro to the mock broker and decoded by ``twg.decode`` give:
payload columns equal, and the locator columns filled the file way (path, partition
0, row index). Resume at a row index is checked per format (partition level).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import bytewax.operators as op
import fastavro
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import xlsxwriter  # type: ignore[import-untyped]
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import AvroCodec, JsonCodec
from thalweg_bytewax.connectors.files import FileSource, split_rejects
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.records.ids import record_ids_array
from thalweg_bytewax.testing import produce

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("paid", pa.bool_()),
    ]
)
AVRO = {
    "type": "record",
    "name": "order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": ["null", "string"]},
        {"name": "amount", "type": ["null", "double"]},
        {"name": "paid", "type": ["null", "boolean"]},
    ],
}
N = 300
FORMATS = ["parquet", "csv", "ndjson", "avro", "arrow", "xlsx", "xml"]


def rows() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "customer": None if i % 17 == 0 else f"c-{i % 23}",
            "amount": round(i * 1.25, 2),
            "paid": i % 3 == 0,
        }
        for i in range(N)
    ]


def write(fmt: str, path: Path, data: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(data, SCHEMA)
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=70)
    elif fmt == "csv":
        pacsv.write_csv(table, path)
    elif fmt == "ndjson":
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
    elif fmt == "avro":
        with path.open("wb") as f:
            fastavro.writer(f, AVRO, data, sync_interval=2000, codec="deflate")
    elif fmt == "arrow":
        with pa.OSFile(str(path), "wb") as f, ipc.new_file(f, SCHEMA) as w:
            w.write_table(table, max_chunksize=64)
    elif fmt == "xlsx":
        wb = xlsxwriter.Workbook(str(path))
        ws = wb.add_worksheet("orders")
        ws.write_row(0, 0, SCHEMA.names)
        for i, r in enumerate(data, start=1):
            ws.write_row(i, 0, [r[n] for n in SCHEMA.names])
        wb.close()
    elif fmt == "xml":
        def el(r: dict[str, Any]) -> str:
            inner = "".join(
                f"<{n}>{str(r[n]).lower() if isinstance(r[n], bool) else r[n]}</{n}>"
                for n in SCHEMA.names
                if r[n] is not None
            )
            return f"<order>{inner}</order>"

        path.write_text("<orders>" + "".join(el(r) for r in data) + "</orders>")


def read_all(source: FileSource) -> tuple[pa.Table, pa.Table]:
    flow = Dataflow("files")
    files = split_rejects("split", op.input("in", flow, source))
    ok: list[tuple[str, pa.RecordBatch]] = []
    bad: list[tuple[str, pa.RecordBatch]] = []
    op.output("ok", files.ok, TestingSink(ok))
    op.output("bad", files.rejected, TestingSink(bad))
    run_main(flow)
    okt = pa.Table.from_batches([b for _, b in ok]) if ok else None
    badt = pa.Table.from_batches([b for _, b in bad]) if bad else None
    return okt, badt


def kafka_decoded(bootstrap: str, topic: str, codec: Any, payloads: list[bytes]) -> pa.Table:
    produce(bootstrap, topic, [{"value": p, "partition": 0} for p in payloads])
    flow = Dataflow("kafka")
    raw = op.input("in", flow, KafkaSource([bootstrap], [topic], tail=False))
    out: list[tuple[str, pa.RecordBatch]] = []
    op.output("ok", twg.decode("decode", raw, codec).ok, TestingSink(out))
    run_main(flow)
    return pa.Table.from_batches([b for _, b in out]).sort_by("_twg_source_offset")


@pytest.fixture(scope="module")
def kafka_json(kafka_bootstrap: str) -> pa.Table:
    payloads = [json.dumps(r).encode() for r in rows()]
    return kafka_decoded(kafka_bootstrap, "files-eq-json", JsonCodec(SCHEMA), payloads)


@pytest.fixture(scope="module")
def kafka_avro(kafka_bootstrap: str) -> pa.Table:
    parsed = fastavro.parse_schema(AVRO)
    payloads = []
    for r in rows():
        import io

        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        payloads.append(buf.getvalue())
    codec = AvroCodec(framing="none", schema=AVRO)
    return kafka_decoded(kafka_bootstrap, "files-eq-avro", codec, payloads)


@pytest.mark.kafka
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_as_the_kafka_records_decode(
    fmt: str, tmp_path: Path, kafka_json: pa.Table, kafka_avro: pa.Table
) -> None:
    path = tmp_path / f"orders.{fmt}"
    write(fmt, path, rows())
    ok, bad = read_all(FileSource(str(path), schema=SCHEMA, batch_rows=50, record_path="/orders/order"))
    assert bad is None
    ok = ok.sort_by("_twg_source_offset")
    kafka = kafka_json
    # Kafka's decode and the file source give the same payload columns, same types.
    assert ok.select(SCHEMA.names).equals(kafka.select(SCHEMA.names))
    assert ok.schema.names == kafka.schema.names
    assert ok.schema.field("_twg_record_id").type == kafka.schema.field("_twg_record_id").type
    # Avro bodies decode as Kafka's bare Avro records do (same codec, same decode).
    assert ok.select(SCHEMA.names).cast(SCHEMA).equals(kafka_avro.select(SCHEMA.names).cast(SCHEMA))
    # The locator, the file way.
    assert set(ok.column("_twg_source_topic").to_pylist()) == {str(path)}
    assert set(ok.column("_twg_source_partition").to_pylist()) == {0}
    assert ok.column("_twg_source_offset").to_pylist() == list(range(N))
    assert ok.column("_twg_record_id").unique().__len__() == N


def test_record_ids_hash_the_raw_line_of_ndjson(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson"
    write("ndjson", path, rows())
    ok, _ = read_all(FileSource(str(path), schema=SCHEMA))
    lines = pa.array([json.dumps(r).encode() for r in rows()], pa.binary())
    ids = record_ids_array(None, str(path), 0, pa.array(range(N), pa.int64()), lines)
    assert ok.column("_twg_record_id").combine_chunks().equals(ids)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_partition_resumes_at_the_row_after_its_snapshot(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"orders.{fmt}"
    write(fmt, path, rows())
    source = FileSource(str(path), schema=SCHEMA, batch_rows=40, record_path="/orders/order")
    [key] = source.list_parts()
    part = source.build_part("s", key, None)
    first = part.next_batch()
    state = part.snapshot()
    last_seen = max(b.column("_twg_source_offset")[-1].as_py() for _, b in first)
    assert state == last_seen + 1
    part.close()
    resumed = source.build_part("s", key, state)
    offsets: list[int] = []
    try:
        while True:
            for _, b in resumed.next_batch():
                offsets += b.column("_twg_source_offset").to_pylist()
    except StopIteration:
        pass
    assert offsets == list(range(state, N))


def test_formats_without_a_schema_need_one_or_infer(tmp_path: Path, caplog: Any) -> None:
    from thalweg_bytewax.errors import ConfigError

    path = tmp_path / "o.csv"
    write("csv", path, rows())
    with pytest.raises(ConfigError, match="expected `schema=`"):
        FileSource(str(path), format="csv")
    ok, _ = read_all(FileSource(str(path), schema="infer"))
    assert ok.num_rows == N
    assert "inferred" in caplog.text
