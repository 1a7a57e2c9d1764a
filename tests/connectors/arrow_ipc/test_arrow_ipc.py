"""ArrowIPCSink: deterministic files per epoch, replays written once, formats, compression."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
import pytest
from bytewax.errors import BytewaxRuntimeError

from tests.helpers import cause_of, raw_batch, run_into
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.errors import ConfigError, SinkTerminalError

PART = "_twg_source_partition"
OFF = "_twg_source_offset"


def read_dir(root: Path) -> pa.Table:
    """Every finalized file under ``root``, read the way another process would."""
    tables = []
    for path in sorted(root.rglob("*.arrow*")):
        if path.name.startswith("."):
            continue
        with pa.memory_map(str(path)) as f:
            reader = ipc.open_file(f) if path.suffix == ".arrow" else ipc.open_stream(f)
            tables.append(reader.read_all())
    return pa.concat_tables(tables, promote_options="default")


def located(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column(PART).to_pylist(), table.column(OFF).to_pylist(), strict=True))


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize(("fmt", "suffix"), [("file", ".arrow"), ("stream", ".arrows")])
def test_replayed_and_overlapping_batches_are_written_once(
    tmp_path: Path, fmt: str, suffix: str
) -> None:
    out = tmp_path / "ipc"
    run_into([("t:0", raw_batch("t", 0, range(100)))], ArrowIPCSink(out, format=fmt))
    # A second run replays with other batch boundaries, overlapping and extending.
    run_into(
        [("t:0", raw_batch("t", 0, range(50, 120))), ("t:0", raw_batch("t", 0, range(120, 150)))],
        ArrowIPCSink(out, format=fmt),
    )
    assert located(read_dir(out)) == [(0, o) for o in range(150)]
    assert names(out / "t" / "0") == [
        f"00000000000000000000-00000000000000000099{suffix}",
        f"00000000000000000100-00000000000000000149{suffix}",
    ]
    assert "_twg_emit_ts" in read_dir(out).schema.names


def test_each_epoch_publishes_its_own_file_per_source_partition(tmp_path: Path) -> None:
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    from bytewax.recovery import init_db_dir

    init_db_dir(recovery, 1)
    items = [
        ("t:0", raw_batch("t", 0, range(10))),
        ("t:1", raw_batch("t", 1, range(5))),
        ("t:0", raw_batch("t", 0, range(10, 30))),
    ]
    run_into(items, ArrowIPCSink(tmp_path / "ipc"), recovery=recovery)
    assert names(tmp_path / "ipc" / "t" / "0") == [
        "00000000000000000000-00000000000000000009.arrow",
        "00000000000000000010-00000000000000000029.arrow",
    ]
    assert names(tmp_path / "ipc" / "t" / "1") == [
        "00000000000000000000-00000000000000000004.arrow"
    ]


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_compressed_files_are_smaller_and_read_back_the_same(tmp_path: Path, codec: str) -> None:
    rows = raw_batch("t", 0, range(5000), tag="x" * 200)
    run_into([("t:0", rows)], ArrowIPCSink(tmp_path / "plain"))
    run_into([("t:0", rows)], ArrowIPCSink(tmp_path / "packed", compression=codec))
    plain = next((tmp_path / "plain").rglob("*.arrow"))
    packed = next((tmp_path / "packed").rglob("*.arrow"))
    assert packed.stat().st_size < plain.stat().st_size / 5
    a, b = read_dir(tmp_path / "plain"), read_dir(tmp_path / "packed")
    assert a.drop_columns(["_twg_emit_ts"]).equals(b.drop_columns(["_twg_emit_ts"]))


def test_a_schema_change_within_an_epoch_starts_a_new_file(tmp_path: Path) -> None:
    second = raw_batch("t", 0, range(10, 20))
    second = second.append_column("extra", pa.array(["e"] * 10))
    run_into([("t:0", raw_batch("t", 0, range(10))), ("t:0", second)], ArrowIPCSink(tmp_path))
    assert names(tmp_path / "t" / "0") == [
        "00000000000000000000-00000000000000000009.arrow",
        "00000000000000000010-00000000000000000019.arrow",
    ]
    assert located(read_dir(tmp_path)) == [(0, o) for o in range(20)]


def test_max_file_rows_rotates_files_within_an_epoch(tmp_path: Path) -> None:
    items = [("t:0", raw_batch("t", 0, range(i, i + 10))) for i in range(0, 30, 10)]
    run_into(items, ArrowIPCSink(tmp_path, max_file_rows=15))
    assert names(tmp_path / "t" / "0") == [
        "00000000000000000000-00000000000000000019.arrow",
        "00000000000000000020-00000000000000000029.arrow",
    ]


def test_another_record_at_a_held_offset_is_refused_naming_the_directory(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(10)))], ArrowIPCSink(tmp_path))
    with pytest.raises(SinkTerminalError) as info:
        # Offsets 0..9 again with other payloads (other record ids): a recreated topic.
        run_into([("t:0", raw_batch("t", 0, range(12), tag="new"))], ArrowIPCSink(tmp_path))
    err = info.value
    assert "arrow ipc sink: directory `" in str(err)
    assert "holds a different record at offset 0" in str(err)
    assert located(read_dir(tmp_path)) == [(0, o) for o in range(10)]


def test_stale_staging_files_of_a_shard_are_removed_and_never_read(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(10)))], ArrowIPCSink(tmp_path, shards=1))
    stale = tmp_path / "t" / "0" / ".staging-s000-deadbeef.arrow"
    stale.write_bytes(b"partial")
    other = tmp_path / "t" / "0" / ".staging-s001-cafe.arrow"  # another shard's: kept
    other.write_bytes(b"partial")
    assert ArrowIPCSource(tmp_path).files() == [
        str(tmp_path / "t" / "0" / "00000000000000000000-00000000000000000009.arrow")
    ]
    run_into([("t:0", raw_batch("t", 0, range(10, 20)))], ArrowIPCSink(tmp_path, shards=1))
    assert not stale.exists()
    assert other.exists()


def test_a_directory_written_by_another_step_is_refused(tmp_path: Path) -> None:
    run_into([("t:0", raw_batch("t", 0, range(3)))], ArrowIPCSink(tmp_path))
    with pytest.raises((ConfigError, BytewaxRuntimeError)) as info:
        run_into([("t:0", raw_batch("t", 0, range(3)))], ArrowIPCSink(tmp_path), flow_id="other")
    err = cause_of(info.value, ConfigError)
    assert str(err).startswith("arrow ipc sink `other.out`: lane path")
    assert "is written by step `sink.out`" in str(err)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "feather"}, "`format`: expected 'file' (.arrow, random access) or 'stream'"),
        (
            {"compression": "snappy"},
            "`compression`: expected 'none', 'lz4' or 'zstd'; got 'snappy'",
        ),
        ({"shards": 0}, "`shards` expected an integer >= 1; got 0"),
        ({"max_file_rows": True}, "`max_file_rows` expected an integer >= 1; got True"),
        ({"filesystem": "s3"}, "`filesystem` expected a `pyarrow.fs.FileSystem` or None; got str"),
    ],
)
def test_bad_arguments_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="^arrow ipc sink: ") as info:
        ArrowIPCSink(tmp_path, **kwargs)
    assert message in str(info.value)


def test_none_compression_is_accepted_as_none(tmp_path: Path) -> None:
    assert ArrowIPCSink(tmp_path, compression=None).config.ipc_compression is None
    assert ArrowIPCSink(tmp_path, compression="ZSTD").config.ipc_compression == "zstd"


@pytest.mark.slow
def test_another_process_maps_the_finished_files_and_counts_rows(tmp_path: Path) -> None:
    items = [(f"t:{p}", raw_batch("t", p, range(p * 100, p * 100 + 250))) for p in range(3)]
    run_into(items, ArrowIPCSink(tmp_path / "ipc"))
    (tmp_path / "ipc" / "t" / "0" / ".staging-s009-x.arrow").write_bytes(b"never read")
    reader = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        import pyarrow as pa, pyarrow.ipc as ipc
        rows = 0
        allocated = pa.total_allocated_bytes()
        for path in sorted(Path(sys.argv[1]).rglob("*.arrow")):
            if path.name.startswith("."):
                continue
            with pa.memory_map(str(path)) as f:
                rows += ipc.open_file(f).read_all().num_rows
        print(rows, pa.total_allocated_bytes() - allocated)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", reader, str(tmp_path / "ipc")],
        capture_output=True,
        text=True,
        check=True,
    )
    rows, allocated = map(int, done.stdout.split())
    assert rows == 750
    assert allocated == 0  # mapped, not copied: uncompressed batches are views of the file


def test_an_fsspec_memory_file_system_holds_and_serves_the_directory() -> None:
    mem = fsspec.filesystem("memory")
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(mem))
    root = "/ipc-test-mem"
    try:
        items = [("t:0", raw_batch("t", 0, range(40))), ("t:1", raw_batch("t", 1, range(7)))]
        run_into(items, ArrowIPCSink(root, filesystem=fs))
        run_into([("t:0", raw_batch("t", 0, range(30, 50)))], ArrowIPCSink(root, filesystem=fs))
        listed = sorted(p for p in mem.find(root) if not p.rpartition("/")[2].startswith("."))
        assert listed == [
            f"{root}/t/0/00000000000000000000-00000000000000000039.arrow",
            f"{root}/t/0/00000000000000000040-00000000000000000049.arrow",
            f"{root}/t/1/00000000000000000000-00000000000000000006.arrow",
        ]
        source = ArrowIPCSource(root, filesystem=fs)
        got = []
        for key in source.list_parts():
            part = source.build_part("s.in", key, None)
            try:
                while True:
                    got.extend(part.next_batch())
            except StopIteration:
                pass
            part.close()
        table = pa.Table.from_batches([b for _, b in got])
        assert located(table) == [(0, o) for o in range(50)] + [(1, o) for o in range(7)]
        assert {k for k, _ in got} == {"t:0", "t:1"}
    finally:
        mem.rm(root, recursive=True)
