"""What a line-format reader holds between two batches: never a copy of its block.

Bytewax asks each partition of a worker for a batch in turn, so every file a worker reads
is suspended mid-block most of the time. A reader that kept the bytes it read, the block
cut from them or the block without its header line held two or three copies of a block
per open file (8 MiB each by default) for as long as the block's rows took to go out: a
flow's peak memory grew with its files' sizes up to that bound, and with its number of
files beyond it. The parsed rows live in Arrow; the bytes must not outlive the parse.

The blocks themselves are read into Arrow buffers, not Python bytes: glibc keeps the
freed blocks of the C heap (it raises its mmap threshold to the size of a freed block
and carves the next ones from its heaps), and a flow's peak RSS then grew with its
input at the allocators' defaults.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.connectors.files.test_files_formats import SCHEMA
from thalweg_bytewax.connectors.files import _csv as _files_csv
from thalweg_bytewax.connectors.files import _lines as _files_lines
from thalweg_bytewax.connectors.files._common import Chunk, ReadOptions
from thalweg_bytewax.connectors.files._partition import FileTarget

BLOCK = 1 << 20
ROWS = 100_000  # ~2.4 MB of CSV: three blocks


def _held(blocks: pa.MemoryPool) -> list[int]:
    """Sizes of the reader's live Python allocations of half a block or more, and the
    bytes of its Arrow blocks still allocated when that is half a block or more.

    Arrow's CSV parser works on its own threads and lets go of the block it was handed
    when its last task ends, which can be just after the rows came back: the buffers are
    looked for again for a while, and only those still held then count. A reader that
    keeps the bytes itself holds them for as long as its rows are out.
    """
    mine = tracemalloc.Filter(True, "*/thalweg_bytewax/connectors/files/*")  # made there
    deadline = time.monotonic() + 2.0
    while True:
        snapshot = tracemalloc.take_snapshot().filter_traces([mine])
        held = sorted(t.size for t in snapshot.traces if t.size >= BLOCK // 2)
        if blocks.bytes_allocated() >= BLOCK // 2:
            held.append(blocks.bytes_allocated())
        if not held or time.monotonic() > deadline:
            return held
        time.sleep(0.02)


def _suspended_at(
    chunks: Iterator[Chunk], stops: set[int], blocks: pa.MemoryPool
) -> dict[int, list[int]]:
    held: dict[int, list[int]] = {}
    for n, _chunk in enumerate(chunks):
        if n in stops:
            held[n] = _held(blocks)
    assert set(held) == stops, "the file had fewer chunks than the test expects"
    return held


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


_POOLS: list[pa.MemoryPool] = []
"""Every counting pool made, kept for the life of the process: Arrow's CSV parser lets go
of a block on its own threads after the rows came back, possibly after the test ended,
and a buffer freed into a pool that no longer exists crashes the process."""


@pytest.fixture
def blocks(monkeypatch: pytest.MonkeyPatch) -> pa.MemoryPool:
    """A pool that counts the Arrow buffers the readers allocate themselves: their blocks."""
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    _POOLS.append(pool)
    real = pa.allocate_buffer

    def allocate(size: int, memory_pool: object = None, resizable: bool = False) -> pa.Buffer:
        return real(size, memory_pool=pool, resizable=resizable)

    monkeypatch.setattr(pa, "allocate_buffer", allocate)
    return pool


def test_a_csv_reader_between_batches_holds_no_copy_of_its_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traced: None, blocks: pa.MemoryPool
) -> None:
    monkeypatch.setattr(_files_csv, "CSV_BLOCK_BYTES", BLOCK)
    path = tmp_path / "o.csv"
    body = [f"{i},c{i % 7},{i}.25,{'true' if i % 2 else 'false'}" for i in range(ROWS)]
    path.write_text("\n".join(["id,customer,amount,paid", *body]) + "\n")
    del body
    chunks = _files_csv.read_csv(FileTarget(str(path)), 0, ReadOptions(SCHEMA, 1000))
    # The first chunk (the block the header was cut from) and one of a later block.
    held = _suspended_at(chunks, {0, 60}, blocks)
    assert held == {0: [], 60: []}, held
    assert blocks.max_memory() >= BLOCK  # the blocks were read into Arrow's pool


def test_an_ndjson_reader_between_batches_holds_no_copy_of_its_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traced: None, blocks: pa.MemoryPool
) -> None:
    monkeypatch.setattr(_files_lines, "NDJSON_BLOCK_BYTES", BLOCK)
    path = tmp_path / "o.ndjson"
    rows = (
        {"id": i, "customer": f"c{i % 7}", "amount": i + 0.25, "paid": bool(i % 2)}
        for i in range(ROWS // 2)  # ~3.6 MB of NDJSON: four blocks
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    chunks = _files_lines.read_ndjson(FileTarget(str(path)), 0, ReadOptions(SCHEMA, 1000))
    held = _suspended_at(chunks, {0, 30}, blocks)
    assert held == {0: [], 30: []}, held
    assert blocks.max_memory() >= BLOCK  # the blocks were read into Arrow's pool
