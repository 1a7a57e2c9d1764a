"""Shared benchmark plumbing: run one variant in a child process and read its result."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Sequence


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(script: str, args: Sequence[str], *, name: str) -> dict[str, float]:
    """Run ``script`` with ``args`` in a fresh interpreter; its last stdout line is JSON.

    Each variant runs in its own process so that its peak RSS is its own.
    """
    out = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
