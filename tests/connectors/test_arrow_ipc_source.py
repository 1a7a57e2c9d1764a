"""ArrowIPCSource: one partition per file, resume at the next batch, keyed by source partition."""

from __future__ import annotations

import logging
from pathlib import Path

import bytewax.operators as op
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, run_main

from tests.fixtures.flows import EntryPoint
from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.lanes import read_lane

OFF = "_twg_source_offset"


def write_ipc(path: Path, batches: list[pa.RecordBatch], *, stream: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = ipc.new_stream if stream else ipc.new_file
    with new(str(path), batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return path


def drain(source: ArrowIPCSource, key: str, state: int | None = None) -> list[tuple[str, pa.RecordBatch]]:
    part = source.build_part("s.in", key, state)
    out: list[tuple[str, pa.RecordBatch]] = []
    try:
        while True:
            out.extend(part.next_batch())
    except StopIteration:
        pass
    part.close()
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_partition_resumes_at_the_batch_after_the_last_it_emitted(
    tmp_path: Path, stream: bool
) -> None:
    batches = [raw_batch("t", 0, range(i * 10, i * 10 + 10)) for i in range(5)]
    path = write_ipc(tmp_path / "a.arrow", batches, stream=stream)
    source = ArrowIPCSource(path)
    (key,) = source.list_parts()
    assert key == f"{path}:0"
    part = source.build_part("s.in", key, None)
    part.next_batch()
    last_seen = part.next_batch()[0][1]
    state = part.snapshot()
    part.close()
    assert state == 2  # the index of the next batch: the last emitted (1) plus one
    again = source.build_part("s.in", key, state)
    resumed = again.next_batch()[0][1]
    again.close()
    assert resumed.column(OFF)[0].as_py() == last_seen.column(OFF)[-1].as_py() + 1
    assert resumed.equals(batches[state])
    # A finished file stays finished.
    assert drain(source, key, 5) == []


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_resume_past_the_end_of_a_file_fails_loudly(tmp_path: Path, stream: bool) -> None:
    path = write_ipc(tmp_path / "a.arrow", [raw_batch("t", 0, range(3))] * 2, stream=stream)
    source = ArrowIPCSource(path)
    with pytest.raises(SourceError, match=r"resumes at batch 7; expected at most 2") as info:
        source.build_part("s.in", source.list_parts()[0], 7)
    assert "this file was replaced" in str(info.value)


def test_batches_are_keyed_by_their_source_partition_or_by_their_file(tmp_path: Path) -> None:
    mixed = pa.concat_batches([raw_batch("t", 0, range(3)), raw_batch("t", 1, range(2))])
    located = write_ipc(tmp_path / "a.arrow", [raw_batch("t", 2, range(4)), mixed])
    plain = write_ipc(tmp_path / "b.arrow", [pa.record_batch({"x": [1, 2]})])
    source = ArrowIPCSource(tmp_path)
    keys = source.list_parts()
    assert keys == [f"{located}:0", f"{plain}:0"]
    got = [(k, b.num_rows) for k, b in drain(source, keys[0])]
    assert got == [("t:2", 4), ("t:0", 3), ("t:1", 2)]
    assert [(k, b.num_rows) for k, b in drain(source, keys[1])] == [(f"{plain}:0", 2)]


def test_directories_and_globs_list_visible_ipc_files_only(tmp_path: Path) -> None:
    run_into(
        [(f"t:{p}", raw_batch("t", p, range(5))) for p in range(3)],
        ArrowIPCSink(tmp_path / "ipc", format="stream"),
    )
    run_into([("u:0", raw_batch("u", 0, range(5)))], ArrowIPCSink(tmp_path / "ipc2"))
    (tmp_path / "ipc" / "t" / "0" / ".staging-s000-x.arrows").write_bytes(b"partial")
    (tmp_path / "ipc" / "_hidden").mkdir()
    (tmp_path / "ipc" / "_hidden" / "x.arrow").write_bytes(b"x")
    (tmp_path / "ipc" / "t" / "notes.txt").write_text("x")
    files = ArrowIPCSource(tmp_path / "ipc").files()
    assert [Path(f).relative_to(tmp_path).as_posix() for f in files] == [
        f"ipc/t/{p}/00000000000000000000-00000000000000000004.arrows" for p in range(3)
    ]
    one = ArrowIPCSource(f"{tmp_path}/ipc/t/1/*.arrows").files()
    assert one == [files[1]]
    deep = ArrowIPCSource(f"{tmp_path}/**/*.arrow").files()
    assert [Path(f).parent.parent.name for f in deep] == ["u"]
    assert ArrowIPCSource(f"file://{tmp_path}/ipc/t/[!1]/*.arrows").files() == [files[0], files[2]]


def test_ipc_directory_into_a_sharded_epoch_sink_lands_every_record_once(
    tmp_path: Path, entry_point: EntryPoint
) -> None:
    items = [(f"t:{p}", raw_batch("t", p, range(i, i + 50))) for i in (0, 50) for p in range(4)]
    run_into(items, ArrowIPCSink(tmp_path / "ipc", shards=3))
    for _ in range(2):  # the second run finds every offset held and writes nothing
        flow = Dataflow("ipc_to_lane")
        batches = op.input("in", flow, ArrowIPCSource(tmp_path / "ipc"))
        op.output("lane", batches, ParquetSink(tmp_path / "lane", shards=4))
        entry_point(flow)
    lane = read_lane(tmp_path / "lane", ["_twg_source_partition", OFF, "_twg_record_id"])
    seen = list(zip(lane.column(0).to_pylist(), lane.column(1).to_pylist(), strict=True))
    assert sorted(seen) == [(p, o) for p in range(4) for o in range(100)]
    assert len(ArrowIPCSource(tmp_path / "ipc").files()) == 4  # one per partition and epoch


def test_following_keeps_partitions_open_and_logs_new_files_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_into([("t:0", raw_batch("t", 0, range(5)))], ArrowIPCSink(tmp_path))
    source = ArrowIPCSource(tmp_path, follow=True, follow_interval_s=3600)
    (key,) = source.list_parts()
    part = source.build_part("s.in", key, None)
    try:
        assert len(part.next_batch()) == 1
        assert part.next_batch() == []  # the end of the file: idle, not finished
        assert part.next_awake() is not None
        assert part.snapshot() == 1
        run_into([("t:1", raw_batch("t", 1, range(3)))], ArrowIPCSink(tmp_path))
        watch = source._watch  # noqa: SLF001 - the watch's thread waits an hour; check now
        assert watch is not None
        with caplog.at_level(logging.WARNING, "thalweg_bytewax.connectors._arrow_ipc_source"):
            watch.check()
            watch.check()
        warned = [r.getMessage() for r in caplog.records]
        assert len(warned) == 1
        assert warned[0].startswith("arrow ipc source: 1 new files under `")
        assert "read when the flow restarts" in warned[0]
        assert [Path(p).parent.name for p in watch.unread] == ["1"]
    finally:
        part.close()


def test_a_flow_that_does_not_follow_ends_after_its_files(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(5)))], ArrowIPCSink(tmp_path))
    out: list[tuple[str, pa.RecordBatch]] = []
    flow = Dataflow("follow")
    op.output("out", op.input("in", flow, ArrowIPCSource(tmp_path)), TestingSink(out))
    run_main(flow)
    assert [(k, b.num_rows) for k, b in out] == [("t:0", 5)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"follow": "yes"}, "`follow` expected True or False; got 'yes'"),
        ({"follow_interval_s": 0}, "`follow_interval_s` expected seconds > 0; got 0"),
        ({"filesystem": 3}, "`filesystem` expected a `pyarrow.fs.FileSystem` or None; got int"),
    ],
)
def test_bad_arguments_are_refused(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="^arrow ipc source: ") as info:
        ArrowIPCSource(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_a_file_that_is_not_ipc_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "x.arrow"
    bad.write_bytes(b"not arrow at all")
    source = ArrowIPCSource(bad)
    with pytest.raises(SourceError, match=r"arrow ipc source: cannot open `.*x\.arrow`"):
        source.build_part("s.in", source.list_parts()[0], None)
