"""Bad files never crash a FileSource: each bad row or piece is a DLQ row with a reason.

Truncated Parquet, CSV with ragged rows, an Avro block with an invalid sync marker, an
Excel sheet with merged header cells, malformed XML, NDJSON with a broken line and a
value that does not fit the schema: the readable rest of each file comes through with
its row indices, and the DLQ rows name the file, the row and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xlsxwriter  # type: ignore[import-untyped]

from tests.connectors.files.test_files_formats import AVRO, FORMATS, SCHEMA, read_all, rows, write
from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.lanes.dlq import dlq_schema


def offsets(table: pa.Table | None) -> list[int]:
    return [] if table is None else sorted(table.column("_twg_source_offset").to_pylist())


def test_truncated_parquet_is_one_dlq_row(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    write("parquet", good, rows())
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(good.read_bytes()[:-100])
    ok, rejected = read_all(FileSource([str(bad), str(good)], schema=SCHEMA))
    assert offsets(ok) == list(range(300))  # the good file, whole
    assert rejected.schema.equals(dlq_schema())
    [row] = rejected.to_pylist()
    assert row["reason"] == "decode"
    assert row["_twg_source_topic"] == str(bad)
    assert "Parquet footer" in row["message"]


def test_ragged_csv_rows_go_to_the_dlq_with_their_text(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    lines = ["id,customer,amount,paid"] + [f"{i},c{i},{i}.5,true" for i in range(10)]
    lines[4] = "3,c3,3.5,true,extra"  # data row 3: one field too many
    lines[8] = "7,c7"  # data row 7: too few
    path.write_text("\n".join(lines) + "\n")
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    assert offsets(ok) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert ok.column("id").to_pylist() == [0, 1, 2, 4, 5, 6, 8, 9]
    got = {r["_twg_source_offset"]: r for r in rejected.to_pylist()}
    assert set(got) == {3, 7}
    assert got[3]["_twg_source_value"] == b"3,c3,3.5,true,extra"
    assert "expected 4" in got[3]["message"]


def test_csv_value_of_the_wrong_type_rejects_that_row_only(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    body = "".join(f"{i},c{i},{'oops' if i == 5 else i},true\n" for i in range(10))
    path.write_text("id,customer,amount,paid\n" + body)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    assert offsets(ok) == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 5
    assert "does not fit the schema" in row["message"]


def test_invalid_avro_sync_marker_rejects_its_block_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "o.avro"
    with path.open("wb") as f:
        fastavro.writer(f, AVRO, rows(), sync_interval=1)  # a block of a few records
    data = bytearray(path.read_bytes())
    with path.open("rb") as f:
        blocks = list(fastavro.block_reader(f))
    assert len(blocks) > 3
    # The second block's trailing sync marker: just before the third block starts.
    marker = blocks[2].offset - 1
    data[marker] ^= 0xFF
    path.write_bytes(bytes(data))
    ok, rejected = read_all(FileSource(str(path)))
    second = range(blocks[0].num_records, blocks[0].num_records + blocks[1].num_records)
    assert offsets(ok) == [i for i in range(300) if i not in second]
    [row] = rejected.to_pylist()
    assert "sync marker" in row["message"]
    assert row["_twg_source_offset"] == second[0]


def test_excel_sheet_with_merged_header_cells_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "o.xlsx"
    wb = xlsxwriter.Workbook(str(path))
    ws = wb.add_worksheet()
    ws.merge_range(0, 0, 0, 1, "id and customer")
    ws.write_row(0, 2, ["amount", "paid"])
    ws.write_row(1, 0, [1, "c", 1.5, True])
    wb.close()
    good = tmp_path / "p.xlsx"
    write("xlsx", good, rows())
    ok, rejected = read_all(FileSource([str(path), str(good)], schema=SCHEMA))
    assert offsets(ok) == list(range(300))
    [row] = rejected.to_pylist()
    assert row["_twg_source_topic"] == str(path)
    assert "merged" in row["message"]
    assert "unmerge the header cells" in row["message"]


def test_malformed_xml_keeps_the_records_before_the_break(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    recs = "".join(
        f"<order><id>{i}</id><customer>c</customer><amount>1.5</amount><paid>true</paid></order>"
        for i in range(5)
    )
    path.write_text(f"<orders>{recs}<order><id>5</id><customer>oops</order></orders>")
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, record_path="/orders/order"))
    assert offsets(ok) == [0, 1, 2, 3, 4]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 5
    assert "malformed XML" in row["message"]


def test_broken_ndjson_line_is_rejected_with_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson"
    lines = [json.dumps(r) for r in rows()[:6]]
    lines[2] = '{"id": 2, "customer": '
    path.write_text("\n".join(lines) + "\n\n")
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    assert offsets(ok) == [0, 1, 3, 4, 5]
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 2
    assert row["_twg_source_value"] == lines[2].encode()


@pytest.mark.parametrize("schema", [SCHEMA, "infer"])
def test_ndjson_lines_that_are_not_utf8_are_rejected_alone_with_their_bytes(
    tmp_path: Path, schema: pa.Schema | str
) -> None:
    path = tmp_path / "o.ndjson"
    lines = [json.dumps(r).encode() for r in rows()[:8]]
    lines[2] = lines[2].replace(b'"customer": "', b'"customer": "\xff\xfe')
    lines[3] = b""  # a blank line consumes its row index
    lines[5] = lines[5].replace(b'"customer": "', b'"customer": "\xc3(')
    path.write_bytes(b"\n".join(lines) + b"\n")
    ok, rejected = read_all(FileSource(str(path), schema=schema))
    assert offsets(ok) == [0, 1, 4, 6, 7]
    assert offsets(rejected) == [2, 5]
    assert [r["_twg_source_value"] for r in rejected.to_pylist()] == [lines[2], lines[5]]
    assert all("UTF-8" in r["message"] for r in rejected.to_pylist())


def test_csv_whose_every_row_is_not_utf8_is_all_dlq_rows_with_their_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.csv"
    path.write_bytes(b"id,customer\r\n1,\xff\r\n\r\n2,b\xfe")  # no newline at the end
    schema = pa.schema([("id", pa.int64()), ("customer", pa.string())])
    ok, rejected = read_all(FileSource(str(path), schema=schema))
    assert ok is None
    assert [(r["_twg_source_offset"], r["_twg_source_value"]) for r in rejected.to_pylist()] == [
        (0, b"1,\xff"), (1, b"2,b\xfe")
    ]


def test_parquet_cast_to_a_contract_schema(tmp_path: Path) -> None:
    path = tmp_path / "o.parquet"
    table = pa.table({"id": pa.array([1, 2], pa.int32()), "customer": ["a", "b"],
                      "amount": [1.0, 2.0], "paid": [True, False], "extra": [1, 2]})
    pq.write_table(table, path)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, metadata="none"))
    assert rejected is None
    assert ok.schema.equals(SCHEMA)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_gone_after_listing_is_a_source_error_not_a_dlq_row(
    fmt: str, tmp_path: Path
) -> None:
    path = tmp_path / f"orders.{fmt}"
    write(fmt, path, rows())
    record_path = "/orders/order" if fmt == "xml" else None
    source = FileSource(str(path), schema=SCHEMA, record_path=record_path)
    listed = source.list_parts()
    path.unlink()
    part = source.build_part("files", listed[0], None)
    try:
        with pytest.raises(SourceError, match=r"cannot read `.*orders\." + fmt):
            part.next_batch()
    finally:
        part.close()
