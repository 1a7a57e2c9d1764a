"""FileSource's CSV reader: blocks on every core, bad rows handled inside their block.

Blocks are made small here so that a file spans many: a ragged row re-parses only its
own block serially (row indices still exact), a wrong-typed value re-parses only its
own block as text, batches hold ``batch_rows`` rows whatever the block size, and a
resume skips the blocks before its row without parsing them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.connectors.files.test_files_formats import SCHEMA, read_all
from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.connectors.files import _csv as _files_csv
from thalweg_bytewax.connectors.files import _partition as _files_partition

ROWS = 500


def lines() -> list[str]:
    return [f"{i},c{i % 7},{i}.25,{'true' if i % 2 else 'false'}" for i in range(ROWS)]


def write(path: Path, body: list[str], blank_every: int = 0) -> None:
    out = ["id,customer,amount,paid"]
    for i, line in enumerate(body):
        out.append(line)
        if blank_every and i % blank_every == 0:
            out.append("")  # blank lines are not rows
    path.write_text("\n".join(out) + "\n")


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    """Small blocks; records (threads, as_text) of each block parse."""
    monkeypatch.setattr(_files_csv, "CSV_BLOCK_BYTES", 1024)
    seen: list[tuple[bool, bool]] = []
    real = _files_csv._parse

    def spy(block: bytes, names: list[str], convert: Any, *, threads: bool) -> Any:
        types = convert.column_types
        seen.append((threads, bool(types) and all(t == pa.string() for t in types.values())))
        return real(block, names, convert, threads=threads)

    monkeypatch.setattr(_files_csv, "_parse", spy)
    return seen


def test_ragged_rows_in_several_blocks_keep_exact_row_indices(
    tmp_path: Path, parses: list[tuple[bool, bool]]
) -> None:
    body = lines()
    ragged = {3, 120, 121, 377, ROWS - 1}
    for i in ragged:
        body[i] = body[i] + ",extra" if i % 2 else f"{i},c"
    path = tmp_path / "o.csv"
    write(path, body, blank_every=50)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, batch_rows=64))
    good = [i for i in range(ROWS) if i not in ragged]
    assert ok.column("_twg_source_offset").to_pylist() == good
    assert ok.column("id").to_pylist() == good
    got = {r["_twg_source_offset"]: r["_twg_source_value"] for r in rejected.to_pylist()}
    assert got == {i: body[i].encode() for i in ragged}
    blocks = sum(1 for threads, _ in parses if threads)
    serial = sum(1 for threads, _ in parses if not threads)
    assert blocks >= 10
    assert serial == 4  # rows 120 and 121 share a block: only the ragged blocks again


def test_a_wrong_typed_value_reparses_only_its_block_as_text(
    tmp_path: Path, parses: list[tuple[bool, bool]]
) -> None:
    body = lines()
    body[250] = "250,c5,oops,true"
    path = tmp_path / "o.csv"
    write(path, body)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, batch_rows=64))
    assert ok.column("_twg_source_offset").to_pylist() == [i for i in range(ROWS) if i != 250]
    assert ok.schema.field("amount").type == pa.float64()
    [row] = rejected.to_pylist()
    assert row["_twg_source_offset"] == 250
    assert "does not fit the schema" in row["message"]
    assert sum(1 for _, text in parses if text) == 1


def test_batches_follow_batch_rows_not_blocks(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    write(path, lines())
    source = FileSource(str(path), schema=SCHEMA, batch_rows=37)
    [key] = source.list_parts()
    part = source.build_part("s", key, None)
    sizes: list[int] = []
    try:
        while True:
            sizes += [b.num_rows for _, b in part.next_batch()]
    except StopIteration:
        pass
    part.close()
    assert sum(sizes) == ROWS
    assert max(sizes) == 37
    assert sizes.count(37) >= ROWS // 37 - 1


def test_resume_skips_earlier_blocks_unparsed(
    tmp_path: Path, parses: list[tuple[bool, bool]]
) -> None:
    path = tmp_path / "o.csv"
    write(path, lines(), blank_every=9)
    source = FileSource(str(path), schema=SCHEMA, batch_rows=50)
    [key] = source.list_parts()
    part = source.build_part("s", key, 400)
    offsets: list[int] = []
    ids: list[int] = []
    try:
        while True:
            for _, b in part.next_batch():
                offsets += b.column("_twg_source_offset").to_pylist()
                ids += b.column("id").to_pylist()
    except StopIteration:
        pass
    part.close()
    assert offsets == ids == list(range(400, ROWS))
    assert len(parses) <= 4  # the blocks from row 400 on, not the whole file


def test_closing_mid_file_frees_the_read_ahead_slots(tmp_path: Path) -> None:
    paths = []
    for k in range(5):
        path = tmp_path / f"o{k}.csv"
        write(path, lines())
        paths.append(str(path))
    source = FileSource(paths, schema=SCHEMA, batch_rows=10)
    parts = [source.build_part("s", key, None) for key in source.list_parts()]
    for part in parts:
        part.next_batch()
    for part in parts:
        part.close()
    free = 0
    while _files_partition._slots.acquire(blocking=False):
        free += 1
    for _ in range(free):
        _files_partition._slots.release()
    assert free == _files_partition.AHEAD_CHUNKS


def test_rows_that_are_not_utf8_are_dlq_rows_with_their_bytes_and_the_rest_lands(
    tmp_path: Path, parses: list[tuple[bool, bool]]
) -> None:
    body = lines()
    # 250 and 252 share a block with a ragged row (251) and blank lines; 400 is alone.
    body[251] = body[251] + ",extra"
    path = tmp_path / "o.csv"
    write(path, body, blank_every=50)
    data = path.read_bytes()
    bad = {250: b"250,c\xff\xfe,250.25,false", 252: b"252,\xc3(,252.25,false",
           400: b"400,c1,400.25,\xe2\x82"}
    for i, raw in bad.items():
        good = body[i].encode()
        assert data.count(good + b"\n") == 1
        data = data.replace(good + b"\n", raw + b"\r\n")
    path.write_bytes(data)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA, batch_rows=64))
    rows = {r["_twg_source_offset"]: r for r in rejected.to_pylist()}
    assert sorted(rows) == [250, 251, 252, 400]
    for i, raw in bad.items():
        assert rows[i]["_twg_source_value"] == raw  # replayable: the row's own bytes
        assert "not UTF-8" in rows[i]["message"]
        assert rows[i]["_twg_record_id"] is not None
    assert "column" in rows[251]["message"]
    kept = ok.column("_twg_source_offset").to_pylist()
    assert kept == [i for i in range(ROWS) if i not in rows]  # offsets as without them
    assert ok.column("id").to_pylist() == kept
    assert ok.column("customer").to_pylist() == [f"c{i % 7}" for i in kept]


def test_rows_that_are_not_utf8_keep_their_offsets_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    write(path, lines(), blank_every=9)
    data = path.read_bytes()
    for i in (10, 30):
        data = data.replace(f"\n{i},c".encode(), f"\n{i},\xff".encode("latin-1"))
    path.write_bytes(data)
    source = FileSource(str(path), schema=SCHEMA, batch_rows=50)
    [key] = source.list_parts()
    part = source.build_part("s", key, 20)
    offsets: list[int] = []
    rejected: list[int] = []
    try:
        while True:
            for _, b in part.next_batch():
                seen = rejected if "reason" in b.schema.names else offsets
                seen += b.column("_twg_source_offset").to_pylist()
    except StopIteration:
        pass
    part.close()
    assert rejected == [30]
    assert offsets == [i for i in range(20, ROWS) if i != 30]


def test_a_block_unreadable_for_another_reason_is_still_one_dlq_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "o.csv"
    write(path, lines())
    real = _files_csv._parse

    def fails_once_utf8_is_fine(block: bytes, names: list[str], convert: Any, *,
                                threads: bool) -> Any:
        if b"\n7,c0," in bytes(block):
            raise pa.ArrowInvalid("CSV parse error: something else")
        return real(block, names, convert, threads=threads)

    monkeypatch.setattr(_files_csv, "CSV_BLOCK_BYTES", 1024)
    monkeypatch.setattr(_files_csv, "_parse", fails_once_utf8_is_fine)
    ok, rejected = read_all(FileSource(str(path), schema=SCHEMA))
    [row] = rejected.to_pylist()
    assert "unreadable as text: CSV parse error: something else" in row["message"]
    lost = set(range(ROWS)) - set(ok.column("_twg_source_offset").to_pylist())
    assert row["_twg_source_offset"] == min(lost) and 7 in lost


def test_parquet_row_groups_larger_than_the_limit_stream_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    from thalweg_bytewax.connectors.files import _columnar as _files_columnar

    path = tmp_path / "o.parquet"
    pq.write_table(pa.table({"id": list(range(ROWS))}), path, row_group_size=200)
    schema = pa.schema([pa.field("id", pa.int64())])
    whole, _ = read_all(FileSource(str(path), schema=schema, batch_rows=64))
    monkeypatch.setattr(_files_columnar, "WHOLE_ROW_GROUP_BYTES", 0)
    streamed, _ = read_all(FileSource(str(path), schema=schema, batch_rows=64))
    assert whole.equals(streamed)
    assert streamed.column("_twg_source_offset").to_pylist() == list(range(ROWS))
