"""The Avro walk and codec survive mutated and hostile bodies under an address-space cap.

A child process (tests/codecs/avro_walk_fuzz_child.py) caps its address space with
``RLIMIT_AS`` at what it maps after start-up plus 512 MiB, then walks and decodes
seeded mutants of written bodies (bytes replaced, cut, inserted, huge varints spliced
in), and walks and decodes attacks that claim 2**62 items taking no byte, a block
count of INT64_MIN or millions of empty items in nested arrays, on both engines, with
and without the native walk, under an alarm (a hang ends the child). Every row must end
decoded or rejected, the written bodies must be proven, every attack stopped by the
count bound and rejected, and the process must neither die nor come near the cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thalweg_bytewax.codecs import _avro_walk

ROOT = Path(__file__).resolve().parents[2]
HEADROOM_MB = 512
COUNT = 13  # the walk's status of a block count more than a row can hold
PEAK_RSS_MB = 400


@pytest.mark.slow
@pytest.mark.skipif(not _avro_walk.NATIVE, reason="the native walk is not built")
def test_mutated_and_hostile_bodies_end_as_rows_or_rejects_under_a_memory_cap() -> None:
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}  # glibc arenas reserve address space
    proc = subprocess.run(
        [sys.executable, "-m", "tests.codecs.avro_walk_fuzz_child", str(HEADROOM_MB)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    *results, last = lines
    assert {r["schema"] for r in results} == {"scalars", "nested", "empty_items"}
    for r in results:
        assert r["proven"] >= 40, r  # at least the written bodies
        if "attacks" in r:  # each claims more items that take no byte than a row may hold
            assert set(r["attacks"]) == {COUNT}, r
        assert r["decoded"] + r["rejected"] == 4 * r["rows"], r  # two engines, two walks
        assert r["rejected"] > 0, r  # the mutants are not all still valid
    assert last["peak_rss_mb"] < PEAK_RSS_MB
