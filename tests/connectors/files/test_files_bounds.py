"""FileSource's bounds: a long line, a decompression bomb or a lying length field is one
DLQ row naming the bound (with the offending bytes where they exist), never a lost
block, a crash or unbounded memory; a line within the bounds simply reads.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest
import xlsxwriter  # type: ignore[import-untyped]

from tests.connectors.files.test_files_formats import read_all
from thalweg_bytewax.codecs.json import JsonCodec
from thalweg_bytewax.connectors.files import DEFAULT_LIMITS, FileLimits, FileSource
from thalweg_bytewax.errors import ConfigError, SourceError

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("text", pa.string())])
BIG = 2 << 20  # over pyarrow's 1 MiB parse block, under the default line bound


def offsets(table: pa.Table | None) -> list[int]:
    return [] if table is None else sorted(table.column("_twg_source_offset").to_pylist())


def csv_lines(n: int, long_at: int, width: int) -> bytes:
    lines = [b"id,text"] + [f"{i},t{i}".encode() for i in range(n)]
    lines[long_at + 1] = f"{long_at},".encode() + b"x" * width
    return b"\n".join(lines) + b"\n"


def test_a_csv_line_over_a_mebibyte_reads_with_the_rest_of_its_block(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    path.write_bytes(csv_lines(100_001, 5, BIG))
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    assert rejected is None
    assert offsets(ok) == list(range(100_001))
    assert ok.filter(pa.compute.equal(ok["id"], 5))["text"][0].as_py() == "x" * BIG


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_a_csv_line_over_the_bound_is_one_dlq_row_with_its_first_bytes(
    tmp_path: Path, suffix: str
) -> None:
    data = csv_lines(1000, 500, BIG)
    path = tmp_path / f"o{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    limits = FileLimits(max_line_bytes=1 << 20)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=limits))
    assert offsets(ok) == [i for i in range(1000) if i != 500]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 500
    assert row["_twg_source_value"] == (b"500," + b"x" * BIG)[: 1 << 20]
    assert "limit:max_line_bytes" in row["message"]
    assert f"a line of {BIG + 4:,} bytes" in row["message"]
    assert "FileLimits(max_line_bytes=" in row["message"]


def test_an_inferred_ndjson_object_over_a_mebibyte_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson"
    docs = [{"id": i, "text": "x" * (BIG if i == 0 else 3)} for i in range(5000)]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    ok, rejected = read_all(FileSource(str(path), schema="infer"))
    assert rejected is None
    assert offsets(ok) == list(range(5000))


def test_an_ndjson_line_over_the_bound_is_one_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson.gz"
    lines = [json.dumps({"id": i, "text": "x"}).encode() for i in range(100)]
    lines[7] = b'{"id": 7, "text": "' + b"y" * BIG + b'"}'
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    limits = FileLimits(max_line_bytes=1 << 20)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=limits))
    assert offsets(ok) == [i for i in range(100) if i != 7]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 7
    assert row["_twg_source_value"] == lines[7][: 1 << 20]
    assert "limit:max_line_bytes" in row["message"]


def test_a_last_line_without_a_newline_is_held_to_the_bound_too(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson"
    last = b'{"id": 2, "text": "' + b"w" * 5000 + b'"}'
    path.write_bytes(b'{"id": 0, "text": "a"}\n{"id": 1, "text": "b"}\n' + last)
    limits = FileLimits(max_line_bytes=1000)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=limits))
    assert offsets(ok) == [0, 1]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 2
    assert row["_twg_source_value"] == last[:1000]


@pytest.mark.parametrize("name", ["o.csv.gz", "o.ndjson.gz"])
def test_a_gzip_file_without_a_newline_streams_past_its_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    head = b"id,text\n0,a\n" if name.startswith("o.csv") else b'{"id": 0, "text": "a"}\n'
    path.write_bytes(gzip.compress(head + b"z" * (8 << 20), 1))
    limits = FileLimits(max_line_bytes=1 << 16)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=limits))
    assert offsets(ok) == [0]
    [row] = rejected.to_pylist()
    assert row["_twg_source_value"] == b"z" * (1 << 16)
    assert f"a line of {8 << 20:,} bytes" in row["message"]


def test_decompressed_bytes_past_the_bound_reject_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "o.csv.gz"
    body = b"id,text\n" + b"".join(f"{i},t\n".encode() for i in range(400_000))
    path.write_bytes(gzip.compress(body))
    limits = FileLimits(max_decompressed_bytes=1 << 20)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=limits))
    [row] = rejected.to_pylist()
    assert "limit:max_decompressed_bytes" in row["message"]
    assert row["_twg_source_offset"] == len(offsets(ok))  # the first row not read


def test_json_codec_inference_never_raises_on_its_sample() -> None:
    big = JsonCodec("infer").decode_batch([b'{"a": "' + b"x" * BIG + b'"}', b'{"a": "y"}'])
    assert big.batch.num_rows == 2
    assert not big.errors
    mixed = JsonCodec("infer").decode_batch([b'{"a": 1}', b'{"a": "x"}', b'{"a": 2}'])
    assert mixed.batch.column("a").to_pylist() == [1, 2]
    assert [e.index for e in mixed.errors] == [1]


def avro_file(schema: dict, records: list[dict], codec: str = "null") -> tuple[bytes, int]:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec=codec)
    data = buf.getvalue()
    return data, data.index(data[-16:]) + 16  # the header ends at the first sync marker


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


EMPTY = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "null"}]}
ROW = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def test_an_avro_size_beyond_the_file_is_a_truncated_block(tmp_path: Path) -> None:
    data, header = avro_file(ROW, [{"id": 1}])
    path = tmp_path / "o.avro"
    path.write_bytes(data[:header] + varint(3) + varint(1 << 62) + b"x" * 30 + data[-16:])
    ok, rejected = read_all(FileSource(str(path)))
    assert ok is None
    [row] = rejected.to_pylist()
    assert "truncated Avro block" in row["message"]


def test_an_avro_block_of_2_40_zero_width_records_is_one_dlq_row(tmp_path: Path) -> None:
    data, header = avro_file(EMPTY, [{"n": None}])
    sync = data[-16:]
    tail = varint(2) + varint(0) + sync  # a good block after the lying one
    path = tmp_path / "o.avro"
    path.write_bytes(data[:header] + varint(1 << 40) + varint(0) + sync + tail)
    ok, rejected = read_all(FileSource(str(path)))
    [row] = rejected.to_pylist()
    assert "limit:max_block_records" in row["message"]
    assert offsets(ok) == [1 << 40, (1 << 40) + 1]  # the next block is read


def test_an_avro_deflate_bomb_is_one_dlq_row_with_its_stored_bytes(tmp_path: Path) -> None:
    data, header = avro_file(ROW, [{"id": 1}], codec="deflate")
    sync = data[-16:]
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = deflate.compress(b"\x00" * (8 << 20)) + deflate.flush()  # 8 MiB of id 0
    path = tmp_path / "o.avro"
    path.write_bytes(data[:header] + varint(8 << 20) + varint(len(bomb)) + bomb + sync)
    ok, rejected = read_all(FileSource(str(path), limits=FileLimits(max_block_bytes=1 << 20)))
    assert ok is None
    [row] = rejected.to_pylist()
    assert "limit:max_block_bytes" in row["message"]
    assert row["_twg_source_value"] == bomb


def test_an_avro_count_beyond_its_bytes_is_rejected_before_decoding(tmp_path: Path) -> None:
    data, header = avro_file(ROW, [{"id": 1}])
    sync = data[-16:]
    path = tmp_path / "o.avro"
    path.write_bytes(data[:header] + varint(1_000_000) + varint(2) + b"\x02\x04" + sync)
    ok, rejected = read_all(FileSource(str(path)))
    assert ok is None
    [row] = rejected.to_pylist()
    assert "1000000 records of 1 byte(s) at least in 2 byte(s)" in row["message"]
    assert row["_twg_source_value"] == b"\x02\x04"


def test_an_xlsx_cell_at_xfd1048576_is_one_dlq_row_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "far.xlsx"
    wb = xlsxwriter.Workbook(str(path))
    ws = wb.add_worksheet()
    ws.write_row(0, 0, ["id", "text"])
    ws.write_row(1, 0, [1, "a"])
    ws.write(1_048_575, 16_383, "x")
    wb.close()
    assert path.stat().st_size < 10_000
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    assert ok is None
    [row] = rejected.to_pylist()
    assert "limit:max_cells" in row["message"]
    assert "1,048,576 row(s) x 16,384 column(s)" in row["message"]


def test_an_xlsx_part_past_its_bound_is_not_decompressed(tmp_path: Path) -> None:
    path = tmp_path / "wide.xlsx"
    wb = xlsxwriter.Workbook(str(path))
    ws = wb.add_worksheet()
    ws.write_row(0, 0, ["id", "text"])
    for i in range(1, 3000):
        ws.write_row(i, 0, [i, "t" * 50])
    wb.close()
    ok, _ = read_all(FileSource(str(path), schema=SCHEMA))
    assert len(offsets(ok)) == 2999  # in bounds by default
    small = FileLimits(max_sheet_bytes=64 << 10)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, limits=small))
    assert ok is None
    [row] = rejected.to_pylist()
    assert "limit:max_sheet_bytes" in row["message"]


def test_limits_are_checked_when_given() -> None:
    assert FileSource("x.csv", schema=SCHEMA).config.limits == DEFAULT_LIMITS
    with pytest.raises(ConfigError, match="max_line_bytes"):
        FileLimits(max_line_bytes=0)
    with pytest.raises(ConfigError, match="expected a FileLimits"):
        FileSource("x.csv", schema=SCHEMA, limits={"max_line_bytes": 1})  # type: ignore[arg-type]


def test_a_missing_file_raises_source_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone.csv"
    with pytest.raises(SourceError, match=r"gone\.csv"):
        FileSource(str(missing), schema=SCHEMA).paths()


def test_an_ipc_batch_with_offsets_past_its_data_is_a_dlq_row(tmp_path: Path) -> None:
    good = pa.record_batch({"id": [0, 1], "text": ["a", "b"]})
    later = pa.record_batch({"id": [2, 3], "text": ["abc", "defg"]})
    path = tmp_path / "o.arrow"
    with pa.ipc.new_file(str(path), good.schema) as w:
        w.write_batch(good)
        w.write_batch(later)
    offsets_ = np.array([0, 3, 7], np.int32).tobytes()
    data = path.read_bytes()
    assert data.count(offsets_) == 1
    path.write_bytes(data.replace(offsets_, np.array([0, 3, 1000], np.int32).tobytes()))
    ok, rejected = read_all(FileSource(str(path)))
    assert offsets(ok) == [0, 1]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 2
    assert "Arrow IPC unreadable from row 2" in row["message"]


NULLS = {
    "type": "record",
    "name": "N",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
    ],
}


def test_an_avro_array_of_2_40_nulls_is_a_dlq_row_not_an_endless_loop(tmp_path: Path) -> None:
    data, header = avro_file(NULLS, [{"id": i, "nulls": [None] * 3} for i in range(3)])
    sync = data[-16:]
    lying = varint(7) + varint(1 << 40) + varint(0) + varint(8) + varint(0)
    after = varint(9) + varint(2) + varint(0)  # a good block after the lying one
    path = tmp_path / "o.avro"
    path.write_bytes(
        data + varint(2) + varint(len(lying)) + lying + sync
        + varint(1) + varint(len(after)) + after + sync
    )
    ok, rejected = read_all(FileSource(str(path)))
    [row] = rejected.to_pylist()
    assert "limit:max_block_records" in row["message"]
    assert "zero-width array items" in row["message"]
    assert row["_twg_source_offset"] == 3
    assert row["_twg_source_value"] == lying  # the rest of the block, replayable
    assert offsets(ok) == [0, 1, 2, 5]
    assert ok.column("nulls").to_pylist() == [[None] * 3] * 3 + [[None] * 2]


def test_avro_zero_width_items_count_against_max_block_records(tmp_path: Path) -> None:
    records = [{"id": i, "nulls": [None] * (150 if i == 4 else 2)} for i in range(10)]
    data, _ = avro_file(NULLS, records)
    path = tmp_path / "o.avro"
    path.write_bytes(data)
    ok, _ = read_all(FileSource(str(path)))
    assert offsets(ok) == list(range(10))  # within the default bound: all of them
    ok, rejected = read_all(FileSource(str(path), limits=FileLimits(max_block_records=100)))
    [row] = rejected.to_pylist()
    assert "limit:max_block_records" in row["message"]
    assert row["_twg_source_offset"] == 4  # the rest of its block, from the record over
    assert offsets(ok) == [0, 1, 2, 3]


def test_avro_bodies_with_zero_width_items_split_as_fastavro_reads_them(
    tmp_path: Path,
) -> None:
    schema = {
        "type": "record",
        "name": "W",
        "namespace": "t",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "e", "type": {"type": "record", "name": "E0", "fields": [
                {"name": "n", "type": "null"}]}},
            {"name": "es", "type": {"type": "array", "items": "t.E0"}},
            {"name": "deep", "type": {"type": "array", "items": {
                "type": "array", "items": "null"}}},
            {"name": "m", "type": {"type": "map", "values": ["null", "string"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F4", "size": 4}},
            {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "x", "type": ["null", "double", "boolean", "bytes"]},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "g", "type": "float"},
        ],
    }
    records = [
        {
            "id": i, "e": {"n": None}, "es": [{"n": None}] * (i % 3),
            "deep": [[None] * j for j in range(i % 4)],
            "m": {"a": None, "b": f"v{i}"} if i % 2 else {},
            "f": b"abcd", "k": "AB"[i % 2],
            "x": [None, 1.5, True, b"\x00\xff"][i % 4],
            "ts": 1_700_000_000_000 + i, "g": i / 4,
        }
        for i in range(40)
    ]
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, sync_interval=300)
    path = tmp_path / "o.avro"
    path.write_bytes(buf.getvalue())
    ok, rejected = read_all(FileSource(str(path)))
    assert rejected is None
    assert offsets(ok) == list(range(40))
    assert ok.column("deep").to_pylist() == [r["deep"] for r in records]
    assert ok.column("es").to_pylist() == [r["es"] for r in records]
    assert ok.column("f").to_pylist() == [b"abcd"] * 40
    assert ok.column("g").to_pylist() == [i / 4 for i in range(40)]
