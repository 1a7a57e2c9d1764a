"""The PostgreSQL sink example under docs/examples runs as written, and twice is idempotent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_postgres_sink_example_runs_and_a_second_run_writes_nothing(pg_dsn: str) -> None:
    try:
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, str(ROOT / "docs/examples/postgres_sink.py"), pg_dsn],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            assert out.returncode == 0, out.stderr[-3000:]
            assert out.stdout.startswith("60 rows; first (0, 0.0)")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS shop CASCADE")
