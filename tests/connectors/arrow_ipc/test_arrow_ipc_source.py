"""ArrowIPCSource: one partition per directory, its files in offset order, resume at the next batch."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, run_main

from tests.fixtures.flows import EntryPoint
from tests.helpers import raw_batch, run_into
from thalweg_bytewax.config import load_config
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource, ArrowIPCSourceConfig
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError, SourceError
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.runtime.recovery import check_recovery_store, stored_state_keys

OFF = "_twg_source_offset"


def write_ipc(path: Path, batches: list[pa.RecordBatch], *, stream: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = ipc.new_stream if stream else ipc.new_file
    with new(str(path), batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return path


def drain(
    source: ArrowIPCSource, key: str, state: tuple[str, int] | None = None
) -> list[tuple[str, pa.RecordBatch]]:
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
    assert key == f"{tmp_path}:0"
    part = source.build_part("s.in", key, None)
    part.next_batch()
    last_seen = part.next_batch()[0][1]
    state = part.snapshot()
    part.close()
    assert state == ("a.arrow", 2)  # the next batch: the last emitted (1) plus one
    again = source.build_part("s.in", key, state)
    resumed = again.next_batch()[0][1]
    again.close()
    assert resumed.column(OFF)[0].as_py() == last_seen.column(OFF)[-1].as_py() + 1
    assert resumed.equals(batches[2])
    # A finished file stays finished.
    assert drain(source, key, ("a.arrow", 5)) == []


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_resume_past_the_end_of_a_file_fails_loudly(tmp_path: Path, stream: bool) -> None:
    path = write_ipc(tmp_path / "a.arrow", [raw_batch("t", 0, range(3))] * 2, stream=stream)
    source = ArrowIPCSource(path)
    with pytest.raises(SourceError, match=r"resumes at batch 7; expected at most 2") as info:
        source.build_part("s.in", source.list_parts()[0], ("a.arrow", 7))
    assert "this file was replaced" in str(info.value)


def test_batches_are_keyed_by_their_source_partition_or_by_their_directory(
    tmp_path: Path,
) -> None:
    mixed = pa.concat_batches([raw_batch("t", 0, range(3)), raw_batch("t", 1, range(2))])
    write_ipc(tmp_path / "a.arrow", [raw_batch("t", 2, range(4)), mixed])
    write_ipc(tmp_path / "b.arrow", [pa.record_batch({"x": [1, 2]})])
    source = ArrowIPCSource(tmp_path)
    (key,) = source.list_parts()
    assert key == f"{tmp_path}:0"
    got = [(k, b.num_rows) for k, b in drain(source, key)]
    assert got == [("t:2", 4), ("t:0", 3), ("t:1", 2), (key, 2)]


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
    source = ArrowIPCSource(tmp_path, follow=True, follow_interval=timedelta(hours=1))
    (key,) = source.list_parts()
    part = source.build_part("s.in", key, None)
    try:
        assert len(part.next_batch()) == 1
        assert part.next_batch() == []  # the end of the file: idle, not finished
        assert part.next_awake() is not None
        assert part.snapshot() == ("00000000000000000000-00000000000000000004.arrow", 1)
        run_into([("t:1", raw_batch("t", 1, range(3)))], ArrowIPCSink(tmp_path))
        watch = source._watch  # noqa: SLF001 - the watch's thread waits an hour; check now
        assert watch is not None
        with caplog.at_level(logging.WARNING, "thalweg_bytewax.connectors.arrow_ipc._listing"):
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
        ({"follow": "yes"}, "`follow` expected a valid boolean; got 'yes'"),
        ({"follow_interval": timedelta(0)}, "`follow_interval` expected greater than 0 seconds"),
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


def test_a_source_partition_of_many_files_reaches_an_epoch_sink_in_offset_order(
    tmp_path: Path, entry_point: EntryPoint
) -> None:
    # Three runs of the writer: three files per source partition, four batches each.
    for run in range(3):
        first = run * 100
        items = [
            (f"t:{p}", raw_batch("t", p, range(first + i, first + i + 25)))
            for i in range(0, 100, 25)
            for p in range(2)
        ]
        run_into(items, ArrowIPCSink(tmp_path / "ipc", shards=2))
    source = ArrowIPCSource(tmp_path / "ipc")
    assert len(source.files()) == 6  # noqa: PLR2004
    assert source.list_parts() == [f"{tmp_path / 'ipc' / 't' / str(p)}:0" for p in range(2)]
    flow = Dataflow("ipc_to_lane")
    op.output("lane", op.input("in", flow, source), ParquetSink(tmp_path / "lane", shards=2))
    entry_point(flow)
    lane = read_lane(tmp_path / "lane", ["_twg_source_partition", OFF])
    seen = list(zip(lane.column(0).to_pylist(), lane.column(1).to_pylist(), strict=True))
    assert sorted(seen) == [(p, o) for p in range(2) for o in range(300)]


def test_a_directory_is_read_in_numeric_offset_order_and_resumes_across_files(
    tmp_path: Path,
) -> None:
    # Unpadded names sort 10-19 before 9-9 as text; offsets put 9-9 first.
    for first, last in ((10, 19), (0, 8), (9, 9), (20, 29)):
        offsets = range(first, last + 1)
        half = (first + last + 1) // 2
        parts = [range(first, half), range(half, last + 1)] if len(offsets) > 1 else [offsets]
        write_ipc(
            tmp_path / "t" / "0" / f"{first}-{last}.arrow", [raw_batch("t", 0, r) for r in parts]
        )
    write_ipc(tmp_path / "t" / "0" / "extra.arrow", [raw_batch("t", 0, [30])])
    source = ArrowIPCSource(tmp_path)
    (key,) = source.list_parts()
    order = [Path(p).name for p in source.files()]
    assert order == ["0-8.arrow", "9-9.arrow", "10-19.arrow", "20-29.arrow", "extra.arrow"]
    part = source.build_part("s.in", key, None)
    emitted = [o for _ in range(4) for _, b in part.next_batch() for o in b.column(OFF).to_pylist()]
    state = part.snapshot()
    part.close()
    assert emitted == list(range(15))
    assert state == ("10-19.arrow", 1)
    rest = [o for _, b in drain(source, key, state) for o in b.column(OFF).to_pylist()]
    assert rest == list(range(15, 31))
    # At the end of a file the state names it with its batch count: the resume goes on
    # with the next file.
    after = [o for _, b in drain(source, key, ("9-9.arrow", 1)) for o in b.column(OFF).to_pylist()]
    assert after == list(range(10, 31))


def test_a_resume_in_a_file_no_longer_listed_fails_loudly(tmp_path: Path) -> None:
    write_ipc(tmp_path / "0-4.arrow", [raw_batch("t", 0, range(5))])
    source = ArrowIPCSource(tmp_path)
    (key,) = source.list_parts()
    with pytest.raises(SourceError, match=r"resumes in `5-9\.arrow` at batch 1, which is no"):
        source.build_part("s.in", key, ("5-9.arrow", 1))
    with pytest.raises(SourceError, match=r"expected \(file name, batch index\)") as info:
        source.build_part("s.in", key, 3)  # type: ignore[arg-type]
    assert "fresh recovery directory" in str(info.value)


class _PerFilePart(StatefulSourcePartition[tuple[str, pa.RecordBatch], int]):
    """One file, batch by batch: how the source read before it read per directory."""

    def __init__(self, path: str, next_index: int) -> None:
        self._reader = ipc.open_file(pa.memory_map(path))
        self._next = next_index

    def next_batch(self) -> list[tuple[str, pa.RecordBatch]]:
        if self._next >= self._reader.num_record_batches:
            raise StopIteration
        batch = self._reader.get_batch(self._next)
        self._next += 1
        return [(f"t:{batch.column('_twg_source_partition')[0].as_py()}", batch)]

    def snapshot(self) -> int:
        return self._next


class _PerFileSource(FixedPartitionedSource[tuple[str, pa.RecordBatch], int]):
    """The earlier per-file layout of partitions and state: keys `<file>:0`, a batch index."""

    def __init__(self, root: Path) -> None:
        self._files = sorted(str(p) for p in root.rglob("*.arrow"))

    def list_parts(self) -> list[str]:
        return [f"{f}:0" for f in self._files]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _PerFilePart:
        return _PerFilePart(for_part.rpartition(":")[0], resume_state or 0)


def test_state_kept_per_file_is_refused_with_a_remedy_that_lands_every_record_once(
    tmp_path: Path,
) -> None:
    for first in (0, 10, 20):  # three files of one batch: read in order even per file
        run_into(
            [("t:0", raw_batch("t", 0, range(first, first + 10)))], ArrowIPCSink(tmp_path / "ipc")
        )
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)

    def read_flow(source: FixedPartitionedSource[Any, Any]) -> Dataflow:
        flow = Dataflow("ipc_read")
        op.output("lane", op.input("in", flow, source), ParquetSink(tmp_path / "lane"))
        return flow

    config = RecoveryConfig(str(recovery))
    # The store as the per-file version left it, after reading every file once.
    run_main(read_flow(_PerFileSource(tmp_path / "ipc")), epoch_interval=timedelta(0),
             recovery_config=config)  # fmt: skip
    assert stored_state_keys(recovery)["ipc_read.in"] == {
        f"{p}:0" for p in ArrowIPCSource(tmp_path / "ipc").files()
    }
    flow = read_flow(ArrowIPCSource(tmp_path / "ipc"))
    # Bytewax refuses to resume it before any connector code runs …
    with pytest.raises(RuntimeError, match="routing map"):
        run_main(flow, epoch_interval=timedelta(0), recovery_config=config)
    # … and the check names the step, the change and the remedy.
    with pytest.raises(ConfigError) as refused:
        check_recovery_store(flow, recovery)
    text = str(refused.value)
    assert "step `ipc_read.in` holds state for files" in text
    assert "one partition per directory" in text
    assert "fresh recovery directory (`python -m bytewax.recovery NEW_DIR N`)" in text
    # The remedy: a fresh store. The source reads from the start; the lane skips replays.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    init_db_dir(fresh, 1)
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(fresh)))
    offsets = read_lane(tmp_path / "lane", [OFF]).column(0).to_pylist()
    assert sorted(offsets) == list(range(30))


def test_follow_interval_s_still_sets_the_interval_with_a_deprecation_warning(
    tmp_path: Path,
) -> None:
    with pytest.warns(DeprecationWarning, match="follow_interval=timedelta"):
        source = ArrowIPCSource(tmp_path, follow=True, follow_interval_s=90)
    assert source.config.follow_interval == timedelta(seconds=90)


def test_the_sources_settings_load_from_the_environment_as_from_its_keywords(
    tmp_path: Path,
) -> None:
    source = ArrowIPCSource(tmp_path, follow=True, follow_interval=timedelta(minutes=2))
    env = {
        "THALWEG_PATH": str(tmp_path),
        "THALWEG_FOLLOW": "true",
        "THALWEG_FOLLOW_INTERVAL": "PT2M",
    }
    assert load_config(ArrowIPCSourceConfig, env=env) == source.config
