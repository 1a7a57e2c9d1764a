"""FileSource survives a fuzz corpus of every format under an address-space cap.

Per format, a child process (tests/connectors/files/files_fuzz_child.py) caps its address
space with ``RLIMIT_AS`` at what it maps after start-up plus 1 GiB, then reads every
file of tests/connectors/files/files_corpus/<format>/ (seeds, mutants, attacks; rebuilt by
tests/connectors/files/make_files_corpus.py) through FileSource's partitions, with small
bounds, and each attack again with the default ones. Every file must end as rows
and/or DLQ rows or a clear ``SourceError``: no other exception, no abort or signal,
and the process's peak memory stays far under the cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = Path(__file__).resolve().parent / "files_corpus"
HEADROOM_MB = 1024
PEAK_RSS_MB = 600
SEED_ROWS = 60
FAST = ["csv", "ndjson", "parquet", "ipc"]
SLOW = ["gzip", "avro", "xlsx"]  # attacks read with the default bounds: seconds each


def run_corpus(fmt: str) -> tuple[list[dict[str, object]], int]:
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}  # glibc arenas reserve address space
    proc = subprocess.run(
        [sys.executable, "-m", "tests.connectors.files.files_fuzz_child", fmt, str(HEADROOM_MB)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"{fmt}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    *results, last = lines
    return results, int(last["peak_rss_mb"])


def check(fmt: str) -> None:
    results, peak = run_corpus(fmt)
    files = sorted(p.name for p in (CORPUS / fmt).iterdir())
    attacks = [f for f in files if "attack" in f]
    assert len(results) == len(files) + len(attacks)  # every file ended, attacks twice
    crashes = [r for r in results if r["outcome"] not in ("read", "source_error")]
    assert crashes == []
    assert peak < PEAK_RSS_MB
    seeds = [r for r in results if str(r["file"]).startswith("seed_")]
    assert seeds
    assert all(r["rows"] == SEED_ROWS and r["dlq"] == 0 for r in seeds), seeds
    for r in results:
        if "attack" in str(r["file"]) and r["limits"] == "fuzz":
            assert r["outcome"] == "read"
            assert r["dlq"], r  # each attack is caught by a bound, as a DLQ row


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FAST)
def test_fuzz_corpus_reads_without_a_crash(fmt: str) -> None:
    check(fmt)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SLOW)
def test_fuzz_corpus_of_attacks_reads_without_a_crash(fmt: str) -> None:
    check(fmt)
