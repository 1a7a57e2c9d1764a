"""The lane's file system edges: durable new directories, negative offsets, stale
staging files, the owner claim as a conditional write, and constructor arguments."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from pyarrow.fs import FSSpecHandler, LocalFileSystem, PyFileSystem

from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane._store import open_store
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.lanes import read_lane


def test_new_topic_and_partition_directories_are_fsynced_in_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rename into a new directory survives a power loss only if the directory's own
    # entry (in its parent) is durable too.
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    lane = tmp_path / "lane"
    run_into([("t:0", raw_batch("t", 0, [0, 1]))], ParquetSink(lane, shards=1))
    assert str(lane / "t" / "0") in synced  # the renames
    assert str(lane / "t") in synced  # the new partition directory's entry
    assert str(lane) in synced  # the new topic directory's entry
    assert str(tmp_path) in synced  # the new lane directory's entry


def test_negative_offsets_are_refused(tmp_path: Path) -> None:
    # `<first>-<last>` names hold 20 digits and no sign: a file of a negative offset is
    # not recognised as coverage, so a replay would write its rows again.
    with pytest.raises(ConfigError, match=r"rows of `t:0` have offset -1; expected offsets >= 0"):
        run_into([("t:0", raw_batch("t", 0, [-1, 0]))], ParquetSink(tmp_path, shards=1))
    assert not list(tmp_path.rglob("*.parquet"))


def test_stale_staging_files_are_removed_at_start_even_where_nothing_is_written(
    tmp_path: Path,
) -> None:
    lane = tmp_path / "lane"
    run_into([("u:7", raw_batch("u", 7, [0]))], ParquetSink(lane, shards=1))
    # A crashed epoch of shard 0 left a staging file in u/7, never written again.
    stale = lane / "u" / "7" / ".staging-s000-0123456789abcdef.parquet"
    stale.write_bytes(b"PAR1 partial")
    run_into([("t:0", raw_batch("t", 0, [0, 1]))], ParquetSink(lane, shards=1))
    assert not stale.exists()
    assert read_lane(lane).num_rows == 3


_RACER: list[str] = []  # the step id of a writer whose claim lands mid-check


class _RacingMemory(MemoryFileSystem):  # type: ignore[misc]
    """Memory file system where another writer claims the lane right after a lookup."""

    protocol = "racing-memory"

    def info(self, path: str, **kwargs: Any) -> Any:
        try:
            return super().info(path, **kwargs)
        finally:
            if path.endswith(".thalweg-lane") and _RACER:
                # The other writer's create lands between this lookup and our write.
                self.pipe_file(path, f"{_RACER.pop()}\n".encode())


def test_the_lane_claim_is_a_conditional_write_on_fsspec_stores() -> None:
    memory = _RacingMemory(skip_instance_cache=True)
    memory.store.clear()
    _RACER[:] = ["flow.other_step"]
    store = open_store("/racing", PyFileSystem(FSSpecHandler(memory)))
    store.ensure_dir(store.root)
    with pytest.raises(ConfigError, match=r"is written by step `flow\.other_step`"):
        store.claim("flow.this_step")
    assert memory.cat("/racing/.thalweg-lane") == b"flow.other_step\n"


def test_the_lane_claim_holds_on_the_local_file_system(tmp_path: Path) -> None:
    for store in (open_store(tmp_path, None), open_store(str(tmp_path), LocalFileSystem())):
        store.claim("flow.a")
        with pytest.raises(ConfigError, match=r"is written by step `flow\.a`"):
            store.claim("flow.b")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".staging-")]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"path": None}, "path"),
        ({"path": ""}, "path"),
        ({"path": 3}, "path"),
        ({"filesystem": fsspec.filesystem("memory")}, "filesystem"),
        ({"shards": 0}, "shards"),
        ({"shards": "4"}, "shards"),
        ({"shards": True}, "shards"),
        ({"shards": 2.5}, "shards"),
        ({"row_group_rows": None}, "row_group_rows"),
        ({"row_group_bytes": -1}, "row_group_bytes"),
        ({"max_file_rows": "many"}, "max_file_rows"),
        ({"compression": None}, "compression"),
        ({"compression": "zip"}, "compression"),
        ({"metadata_prefix": None}, "metadata_prefix"),
        ({"metadata_prefix": "bad prefix"}, "metadata prefix"),
    ],
)
def test_bad_constructor_arguments_are_config_errors_naming_the_argument(
    tmp_path: Path, kwargs: dict[str, Any], argument: str
) -> None:
    args = {"path": tmp_path, **kwargs}
    path = args.pop("path")
    with pytest.raises(ConfigError) as info:
        ParquetSink(path, **args)
    text = str(info.value)
    assert f"`{argument}`" in text or argument in text, text
    assert text[0].islower() and not text.endswith(".")
