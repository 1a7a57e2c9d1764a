"""FileSource over fsspec URLs (``memory://``, ``file://``) and compressed line files.

Reading, resuming at a row and the DLQ work the same through a URL as through a local
path; credentials in a URL (userinfo, query values) appear in no output column, DLQ
row, partition key, log line or error; ``.csv.gz`` and ``.ndjson.gz`` are read by
their suffix.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest

from tests.connectors.files.test_files_formats import SCHEMA, N, read_all, rows, write
from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.errors import SourceError
from thalweg_bytewax.records.ids import record_ids_array

SECRET = "s3cr3tPassw0rd"
TOKEN = "t0kenValue99"


@pytest.fixture
def memfs() -> Iterator[Any]:
    fs = fsspec.filesystem("memory")
    yield fs
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")


def put(url: str, data: bytes) -> None:
    with fsspec.open(url, "wb") as f:
        f.write(data)


def csv_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "src.csv"
    write("csv", path, rows())
    return path.read_bytes()


def drain(source: FileSource, key: str, state: int | None) -> tuple[list[int], int]:
    part = source.build_part("s", key, state)
    offsets: list[int] = []
    try:
        while True:
            for _, b in part.next_batch():
                offsets += b.column("_twg_source_offset").to_pylist()
    except StopIteration:
        pass
    finally:
        part.close()
    return offsets, part.snapshot()


def test_memory_url_reads_resumes_and_rejects(memfs: Any, tmp_path: Path) -> None:
    body = csv_bytes(tmp_path).decode().splitlines()
    body[6] = body[6] + ",extra"  # data row 5: ragged
    put("memory://bucket/orders/a.csv", ("\n".join(body) + "\n").encode())
    put("memory://bucket/orders/b.csv", csv_bytes(tmp_path))
    source = FileSource("memory://bucket/orders/*.csv", schema=SCHEMA, batch_rows=40)
    assert source.paths() == ["memory:///bucket/orders/a.csv", "memory:///bucket/orders/b.csv"]
    ok, bad = read_all(source)
    topics = ok.column("_twg_source_topic").to_pylist()
    assert sorted(set(topics)) == source.paths()
    a = ok.filter(pa.compute.equal(ok.column("_twg_source_topic"), source.paths()[0]))
    assert sorted(a.column("_twg_source_offset").to_pylist()) == [i for i in range(N) if i != 5]
    [row] = bad.to_pylist()
    assert row["_twg_source_offset"] == 5
    assert row["_twg_source_topic"] == "memory:///bucket/orders/a.csv"
    # Resume at a snapshot: the rows after it, once.
    key = source.list_parts()[1]
    part = source.build_part("s", key, None)
    first = part.next_batch()
    state = part.snapshot()
    part.close()
    assert state == sum(b.num_rows for _, b in first) == 40
    offsets, end = drain(source, key, state)
    assert offsets == list(range(40, N))
    assert end == N


def test_file_url_reads_like_the_local_path(tmp_path: Path) -> None:
    path = tmp_path / "o.ndjson"
    write("ndjson", path, rows())
    ok_url, _ = read_all(FileSource(f"file://{path}", schema=SCHEMA))
    ok_path, _ = read_all(FileSource(str(path), schema=SCHEMA))
    assert ok_url.equals(ok_path)
    assert set(ok_url.column("_twg_source_topic").to_pylist()) == {str(path)}


@pytest.mark.parametrize(
    "url",
    [
        f"memory://user:{SECRET}@bucket/x.csv",
        f"memory://bucket/x.csv?token={TOKEN}&X-Amz-Signature={SECRET}",
    ],
)
def test_url_credentials_appear_in_no_output_dlq_row_key_log_or_error(
    url: str, memfs: Any, tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="thalweg_bytewax")
    body = csv_bytes(tmp_path).decode().splitlines()
    body[3] = "2,c2"  # data row 2: ragged
    body[9] = body[9].replace(body[9].split(",")[2], "oops")  # data row 8: not a double
    put(url, ("\n".join(body) + "\n").encode())
    source = FileSource(url, schema=SCHEMA)
    ok, bad = read_all(source)
    assert ok.num_rows == N - 2
    assert sorted(bad.column("_twg_source_offset").to_pylist()) == [2, 8]
    seen = [
        repr(source.list_parts()),
        repr(ok.drop_columns(["_twg_record_id"]).to_pylist()),
        repr(bad.to_pylist()),
        caplog.text,
    ]
    # A file gone between listing and reading: its SourceError names it, not its secrets.
    fs, where = fsspec.core.url_to_fs(url)
    fs.rm(where)
    part = source.build_part("s", source.list_parts()[0], None)
    try:
        with pytest.raises(SourceError, match="cannot read") as gone:
            part.next_batch()
    finally:
        part.close()
    seen.append(str(gone.value))
    seen.append(repr(gone.value.__cause__))
    ours = [r for r in caplog.records if r.name.startswith("thalweg_bytewax")]
    seen.append(repr([r.getMessage() for r in ours]))
    for text in seen:
        assert SECRET not in text
        assert TOKEN not in text
    assert "***" in seen[0]
    # The record id hashes the redacted name: rotating a credential keeps the ids.
    name = ok.column("_twg_source_topic")[0].as_py()
    assert SECRET not in name and TOKEN not in name
    ids = record_ids_array(None, name, 0, ok.column("_twg_source_offset").combine_chunks(),
                           pa.nulls(ok.num_rows, pa.binary()))
    assert ok.column("_twg_record_id").combine_chunks().equals(ids)


def test_unknown_suffix_of_a_url_with_a_token_names_no_secret(memfs: Any) -> None:
    from thalweg_bytewax.errors import ConfigError

    put(f"memory://bucket/x.data?token={TOKEN}", b"a\n1\n")
    source = FileSource(f"memory://bucket/x.data?token={TOKEN}", schema=SCHEMA)
    [key] = source.list_parts()
    assert TOKEN not in key
    with pytest.raises(ConfigError, match="expected a known suffix") as err:
        source.build_part("s", key, None)
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_gzipped_line_files_are_read_by_their_suffix(fmt: str, tmp_path: Path) -> None:
    plain = tmp_path / f"o.{fmt}"
    write(fmt, plain, rows())
    packed = tmp_path / f"o.{fmt}.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    ok_gz, bad = read_all(FileSource(str(packed), schema=SCHEMA, batch_rows=64))
    ok, _ = read_all(FileSource(str(plain), schema=SCHEMA, batch_rows=64))
    assert bad is None
    assert ok_gz.select(SCHEMA.names).equals(ok.select(SCHEMA.names))
    assert ok_gz.column("_twg_source_offset").to_pylist() == list(range(N))
    # Resume inside a compressed file.
    source = FileSource(str(packed), schema=SCHEMA, batch_rows=64)
    offsets, _ = drain(source, source.list_parts()[0], 100)
    assert offsets == list(range(100, N))


def test_gzipped_ndjson_url_in_memory(memfs: Any) -> None:
    data = "".join(json.dumps(r) + "\n" for r in rows()).encode()
    put("memory://bucket/o.ndjson.gz", gzip.compress(data))
    ok, bad = read_all(FileSource("memory://bucket/o.ndjson.gz", schema=SCHEMA))
    assert bad is None
    assert ok.column("_twg_source_offset").to_pylist() == list(range(N))
