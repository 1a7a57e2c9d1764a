"""Writes the fuzz corpus of FileSource: per format, seed files, mutants of them, attacks.

The corpus is committed (tests/connectors/files/files_corpus/<format>/) and read by
tests/connectors/files/test_files_fuzz.py; this script rebuilds it, byte for byte the same
(fixed seeds), when a format or a mutation is added:

    .venv/bin/python -m tests.connectors.files.make_files_corpus

Mutants flip, insert, delete and duplicate bytes (runs of 0xFF make varints and lengths
huge), truncate, and, for text and zipped formats, mutate the text inside. Attacks are
the shapes that once broke a reader: a line longer than the bound, a gzip stream with no
newline, an Avro block lying about its size or count, a deflate bomb, an xlsx cell at
XFD1048576, an xlsx part that inflates past its bound.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import shutil
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import xlsxwriter  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent / "files_corpus"
MUTANTS = 14
ROWS = 60
AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def table() -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "name": [f"n{i}" if i % 7 else None for i in range(ROWS)],
            "amount": [i * 1.25 for i in range(ROWS)],
        }
    )


def csv_bytes() -> bytes:
    buf = io.BytesIO()
    pacsv.write_csv(table(), buf)
    return buf.getvalue()


def ndjson_bytes() -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in table().to_pylist())


def avro_bytes(codec: str) -> bytes:
    buf = io.BytesIO()
    records = [{**r, "tags": ["a", "b"][: r["id"] % 3]} for r in table().to_pylist()]
    fastavro.writer(buf, AVRO, records, codec=codec, sync_interval=400)
    return buf.getvalue()


def parquet_bytes() -> bytes:
    buf = io.BytesIO()
    pq.write_table(table(), buf, row_group_size=20)
    return buf.getvalue()


def ipc_bytes(stream: bool) -> bytes:
    buf = io.BytesIO()
    t = table()
    open_writer = ipc.new_stream if stream else ipc.new_file
    with open_writer(buf, t.schema) as w:
        for b in t.to_batches(max_chunksize=20):
            w.write_batch(b)
    return buf.getvalue()


def xlsx_bytes(cells: Callable[[object], None] | None = None) -> bytes:
    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(buf, {"in_memory": True})
    ws = wb.add_worksheet()
    ws.write_row(0, 0, ["id", "name", "amount"])
    for i, r in enumerate(table().to_pylist(), 1):
        ws.write_row(i, 0, [r["id"], r["name"] or "", r["amount"]])
    if cells is not None:
        cells(ws)
    wb.close()
    return buf.getvalue()


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random structural change: flip, insert a run, delete, duplicate or truncate."""
    b = bytearray(data)
    at = rng.randrange(len(b))
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        b[at:at] = b"\xff" * rng.randint(1, 12) + b"\x01"  # a huge varint or length
    elif kind == 2:
        del b[at : at + rng.randint(1, 64)]
    elif kind == 3:
        piece = b[at : at + rng.randint(1, 200)]
        b[at:at] = piece * rng.randint(2, 20)
    elif kind == 4:
        b[at:at] = rng.choice([b"\n", b",", b'"', b"\r", b"\x00", b"{", b"\\u"])
    else:
        del b[rng.randint(1, len(b)) :]
    return bytes(b)


def rezip(data: bytes, change: Callable[[str, bytes], bytes]) -> bytes:
    """The zip ``data`` with each part replaced by ``change(name, part)``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, change(info.filename, src.read(info)), zipfile.ZIP_DEFLATED)
    return out.getvalue()


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def null_item_attacks() -> dict[str, bytes]:
    """Arrays and maps of ``null``: a count of 2**40 items over no bytes."""

    def container(kind: str, body: bytes) -> bytes:
        inner = {"type": "array", "items": "null"} if kind == "array" else {
            "type": "map", "values": "null"}
        schema = {"type": "record", "name": "Z", "fields": [{"name": "z", "type": inner}]}
        buf = io.BytesIO()
        fastavro.writer(buf, schema, [])
        head = buf.getvalue()
        return head + varint(1) + varint(len(body)) + body + head[-16:]

    return {
        "attack_null_array_2_40.avro": container("array", varint(1 << 40) + varint(0)),
        "attack_null_array_negative_2_40.avro": container(
            "array", varint(-(1 << 40)) + varint(0) + varint(0)
        ),
        "attack_null_map_2_40.avro": container("map", varint(1 << 40) + b"\x02a" + varint(0)),
    }


def avro_attacks() -> dict[str, bytes]:
    good = avro_bytes("null")
    sync = good[-16:]
    header = good[: good.index(sync) + 16]
    empty = io.BytesIO()
    fastavro.writer(
        empty, {"type": "record", "name": "E", "fields": [{"name": "n", "type": "null"}]}, []
    )
    e = empty.getvalue()
    e_sync = e[-16:]
    deflated = avro_bytes("deflate")
    d_sync = deflated[-16:]
    d_header = deflated[: deflated.index(d_sync) + 16]
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = squeeze.compress(b"\x00" * (80 << 20)) + squeeze.flush()  # past 64 MiB
    return {
        **null_item_attacks(),
        "attack_size_2_62.avro": header + varint(3) + varint(1 << 62) + b"x" * 40 + sync,
        "attack_zero_width_2_40.avro": e + varint(1 << 40) + varint(0) + e_sync,
        "attack_count_over_bytes.avro": header + varint(1 << 20) + varint(4) + b"\x02" * 4 + sync,
        "attack_header_map_2_40.avro": b"Obj\x01" + varint(1 << 40) + b"\x02a",
        "attack_deflate_bomb.avro": d_header + varint(1 << 20) + varint(len(bomb)) + bomb + d_sync,
    }


def xlsx_attacks() -> dict[str, bytes]:
    far = xlsx_bytes(lambda ws: ws.write(1_048_575, 16_383, "x"))  # type: ignore[attr-defined]

    def inflate(name: str, part: bytes) -> bytes:
        if name != "xl/worksheets/sheet1.xml":
            return part
        row = b"<row>" + b'<c t="n"><v>1</v></c>' * 100 + b"</row>"
        cut = part.index(b"</sheetData>")
        return part[:cut] + row * ((8 << 20) // len(row)) + part[cut:]

    return {"attack_xfd1048576.xlsx": far, "attack_sheet_bomb.xlsx": rezip(xlsx_bytes(), inflate)}


def line_attacks(suffix: str, head: bytes) -> dict[str, bytes]:
    row = head.splitlines(keepends=True)[-1]
    return {
        f"attack_no_newline{suffix}.gz": gzip.compress(head + b"z" * (24 << 20), 9),
        f"attack_long_line{suffix}.gz": gzip.compress(
            head + b"q" * (600 << 10) + b"\n" + row, 9
        ),
        f"attack_bomb{suffix}.gz": gzip.compress(head + row * ((24 << 20) // len(row)), 9),
    }


def write(fmt: str, seeds: dict[str, bytes], extra: dict[str, bytes], seed: int) -> None:
    rng = random.Random(seed)
    folder = ROOT / fmt
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, data in seeds.items():
        (folder / f"seed_{name}").write_bytes(data)
        stem, dot, ext = name.partition(".")
        for i in range(MUTANTS):
            mutant = data
            for _ in range(rng.randint(1, 3)):
                mutant = mutate(mutant, rng) or mutant
            (folder / f"mut{i:02d}_{stem}{dot}{ext}").write_bytes(mutant)
    for name, data in extra.items():
        (folder / name).write_bytes(data)


def main() -> None:
    csv, nd = csv_bytes(), ndjson_bytes()
    rng = random.Random(11)
    write("csv", {"orders.csv": csv}, {}, 1)
    write("ndjson", {"orders.ndjson": nd}, {}, 2)
    gz = {
        "orders.csv.gz": gzip.compress(csv),
        "orders.ndjson.gz": gzip.compress(nd),
    }
    text_mutants = {
        f"textmut{i:02d}.{ext}.gz": gzip.compress(mutate(src, rng))
        for i in range(6)
        for ext, src in (("csv", csv), ("ndjson", nd))
    }
    attacks = {
        **line_attacks(".csv", b"id,name,amount\n1,a,2.5\n"),
        **line_attacks(".ndjson", b'{"id": 1, "name": "a", "amount": 2.5}\n'),
    }
    write("gzip", gz, {**text_mutants, **attacks}, 3)
    write(
        "avro",
        {"orders_null.avro": avro_bytes("null"), "orders_deflate.avro": avro_bytes("deflate")},
        avro_attacks(),
        4,
    )
    seed_xlsx = xlsx_bytes()

    def sheet_mutant(i: int) -> bytes:
        r = random.Random(100 + i)

        def change(name: str, part: bytes) -> bytes:
            return mutate(part, r) if name.endswith("sheet1.xml") else part

        return rezip(seed_xlsx, change)

    write(
        "xlsx",
        {"orders.xlsx": seed_xlsx},
        {**{f"sheetmut{i:02d}.xlsx": sheet_mutant(i) for i in range(10)}, **xlsx_attacks()},
        5,
    )
    write("parquet", {"orders.parquet": parquet_bytes()}, {}, 6)
    write("ipc", {"orders_file.arrow": ipc_bytes(False), "orders_stream.arrow": ipc_bytes(True)},
          {}, 7)


if __name__ == "__main__":
    main()
