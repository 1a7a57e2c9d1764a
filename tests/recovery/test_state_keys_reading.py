"""Reading a recovery partition this process may hold open: a descriptor the engine
closes between the listing of open files and the read (or whose number then holds
another file) is never read as the partition; the read lists again and finds the rows."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from thalweg_bytewax.runtime import state_keys


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Path]:
    """A recovery partition with one live key of step ``f.s``, left open in WAL mode."""
    db = tmp_path / "part-0.sqlite3"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(
        "CREATE TABLE snaps (step_id TEXT, state_key TEXT, snap_epoch INTEGER, ser_change BLOB)"
    )
    con.execute("INSERT INTO snaps VALUES ('f.s', 'orders:0', 1, x'00')")
    con.commit()
    yield db
    con.close()


def live(db: Path) -> list[tuple[str, str]]:
    return list(state_keys._live_keys(db, "f.s"))  # noqa: SLF001 - the read under test


def test_a_descriptor_closed_after_the_listing_is_not_read(
    partition: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = state_keys._open_here  # noqa: SLF001
    fd = os.open(partition, os.O_RDONLY)
    os.close(fd)  # listed, then closed before the read
    listings = iter([{partition.resolve(): fd}])
    monkeypatch.setattr(state_keys, "_open_here", lambda: next(listings, None) or real())
    assert live(partition) == [("f.s", "orders:0")]


def test_a_descriptor_number_now_holding_another_file_is_not_read(
    partition: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.write_bytes(b"not a database" * 100)
    fd = os.open(other, os.O_RDONLY)
    try:
        real = state_keys._open_here  # noqa: SLF001
        listings = iter([{partition.resolve(): fd}])
        monkeypatch.setattr(state_keys, "_open_here", lambda: next(listings, None) or real())
        assert live(partition) == [("f.s", "orders:0")]
    finally:
        os.close(fd)


def test_a_partition_open_here_is_read_through_a_private_copy(partition: Path) -> None:
    # The fixture's connection holds the file and its log open in this process.
    assert partition.resolve() in state_keys._open_here()  # noqa: SLF001
    with state_keys._readable(partition) as path:  # noqa: SLF001
        assert path != partition
    assert live(partition) == [("f.s", "orders:0")]
