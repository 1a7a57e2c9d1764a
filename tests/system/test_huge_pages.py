"""A process that runs a flow faults in no transparent huge page: Arrow's allocator
would make every 2 MiB it touches resident (docs/benchmarks.md: 30-75 MB of peak RSS
in the decode flow and the raw lane, at the same CPU). ``THALWEG_HUGE_PAGES=keep``
leaves the process as it was; importing the package changes nothing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.helpers import run_probe
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.system import huge_pages
from thalweg_bytewax.system.huge_pages import (
    _PR_SET_THP_DISABLE,
    HUGE_PAGES_ENV,
    _prctl,
    huge_pages_disabled,
    limit_huge_pages,
)

REPO = Path(__file__).resolve().parents[2]
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# The probe runs in a fresh interpreter: the flag is per process and inherited, so it
# first clears what the test runner may have set, then reports the flag after the
# package's import and after a sink partition is built.
PROBE = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(41, 0, 0, 0, 0)  # PR_SET_THP_DISABLE 0: as a fresh login would be
from thalweg_bytewax.system.huge_pages import huge_pages_disabled
from thalweg_bytewax.connectors.parquet import ParquetSink
after_import = huge_pages_disabled()
part = ParquetSink(sys.argv[1], shards=1).build_part("flow.lane", "shard-000", None)
after_build = huge_pages_disabled()
import pyarrow as pa
def huge_kb():
    with open("/proc/self/smaps", encoding="ascii") as smaps:
        return sum(int(l.split()[1]) for l in smaps if l.startswith("AnonHugePages:"))
before = huge_kb()
buffers = [pa.allocate_buffer(1 << 16) for _ in range(1024)]  # 64 MiB, each touched once
for b in buffers:
    memoryview(b).cast("B")[0:1] = b"x"
part.close()
print(json.dumps({
    "after_import": after_import,
    "after_build": after_build,
    "huge_kb_of_arrow_buffers": huge_kb() - before,
    "pool": pa.default_memory_pool().backend_name,
}))
"""

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="transparent huge pages are Linux's"
)


def probe(tmp_path: Path, **env: str) -> dict[str, Any]:
    return run_probe(PROBE, str(tmp_path / "lane"), env=env, unset=[HUGE_PAGES_ENV])


def kernel_offers_huge_pages() -> bool:
    """Whether the kernel gives huge pages to memory that asks (``madvise``/``always``)."""
    return THP_MODE.exists() and "[never]" not in THP_MODE.read_text()


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as a fresh one would be: huge pages allowed, nothing limited yet."""
    linux = sys.platform.startswith("linux")
    before = huge_pages_disabled()
    if linux:
        _prctl(_PR_SET_THP_DISABLE, 0)
    monkeypatch.setattr(huge_pages, "_done", False)
    monkeypatch.delenv(HUGE_PAGES_ENV, raising=False)
    yield
    if linux:
        _prctl(_PR_SET_THP_DISABLE, int(bool(before)))


def huge_kb_after_arrow_buffers() -> int:
    """The huge pages 64 MiB of Arrow buffers, each touched once, bring in (KiB)."""

    def huge_kb() -> int:
        with open("/proc/self/smaps", encoding="ascii") as smaps:
            return sum(int(line.split()[1]) for line in smaps if line.startswith("AnonHugePages:"))

    before = huge_kb()
    buffers = [pa.allocate_buffer(1 << 16) for _ in range(1024)]
    for b in buffers:
        memoryview(b).cast("B")[0:1] = b"x"
    return huge_kb() - before


@linux_only
def test_building_a_partition_turns_huge_pages_off(tmp_path: Path, fresh_process: None) -> None:
    assert huge_pages_disabled() is False
    part = ParquetSink(tmp_path / "lane", shards=1).build_part("flow.lane", "shard-000", None)
    try:
        assert huge_pages_disabled() is True
        assert huge_kb_after_arrow_buffers() == 0
    finally:
        part.close()


@linux_only
def test_keep_leaves_the_process_as_it_was(
    tmp_path: Path, fresh_process: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HUGE_PAGES_ENV, "keep")
    part = ParquetSink(tmp_path / "lane", shards=1).build_part("flow.lane", "shard-000", None)
    try:
        assert huge_pages_disabled() is False
    finally:
        part.close()


@pytest.mark.slow
@linux_only
def test_with_keep_arrow_gets_huge_pages_in_a_fresh_process(tmp_path: Path) -> None:
    """What the default saves: Arrow's allocator asks for huge pages and, kept, gets
    them. Measured in a fresh interpreter: one that ran other tests may serve the
    buffers from memory its allocator already holds in small pages."""
    seen = probe(tmp_path, THALWEG_HUGE_PAGES="keep")
    assert seen["after_build"] is False
    if kernel_offers_huge_pages() and seen["pool"] == "mimalloc":
        assert int(str(seen["huge_kb_of_arrow_buffers"])) >= 2048
    off = probe(tmp_path)
    assert off["after_build"] is True
    assert off["huge_kb_of_arrow_buffers"] == 0


def test_an_unknown_value_is_refused_naming_the_variable(
    fresh_process: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HUGE_PAGES_ENV, "sometimes")
    with pytest.raises(
        ConfigError, match="`THALWEG_HUGE_PAGES`: expected `off` or `keep`; got `sometimes`"
    ):
        limit_huge_pages()


@linux_only
def test_a_refused_prctl_warns_and_the_flow_runs_on(
    tmp_path: Path,
    fresh_process: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refused(option: int, arg: int = 0) -> int:  # a seccomp profile's answer
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(huge_pages, "_prctl", refused)
    with caplog.at_level("WARNING", logger=huge_pages.__name__):
        part = ParquetSink(tmp_path / "lane", shards=1).build_part("flow.lane", "shard-000", None)
    part.close()
    assert "transparent huge pages stay on for this process" in caplog.text
    assert "THALWEG_HUGE_PAGES=keep" in caplog.text


@pytest.mark.slow
@linux_only
def test_importing_the_package_changes_nothing(tmp_path: Path) -> None:
    seen = probe(tmp_path)
    assert seen["after_import"] is False
    assert seen["after_build"] is True
