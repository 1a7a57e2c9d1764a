"""Importing thalweg makes jemalloc pyarrow's pool unless the process chose one.

mimalloc (pyarrow's default on Linux) keeps the pages of freed buffers: a decode flow's
peak RSS was ~50 MB higher with it (docs/connectors/kafka.md "Memory"). Each check runs
in a fresh interpreter, since pyarrow's default pool is process state.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from thalweg_bytewax import _arrow_pool
from thalweg_bytewax.errors import ConfigError

PROBE = """
import pyarrow as pa
import thalweg_bytewax
print(pa.default_memory_pool().backend_name)
"""


def _pool_after_import(**env: str) -> str:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARROW_DEFAULT_MEMORY_POOL", "THALWEG_ARROW_POOL")
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**clean, **env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_importing_thalweg_sets_the_jemalloc_pool() -> None:
    assert _pool_after_import() == "jemalloc"


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["system", "mimalloc"])
def test_the_process_choice_of_pool_stands(pool: str) -> None:
    assert _pool_after_import(ARROW_DEFAULT_MEMORY_POOL=pool) == pool
    assert _pool_after_import(THALWEG_ARROW_POOL=pool) == pool


@pytest.mark.slow
def test_keep_leaves_pyarrows_own_default() -> None:
    own = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pyarrow as pa; print(pa.default_memory_pool().backend_name)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert _pool_after_import(THALWEG_ARROW_POOL="keep") == own


def test_an_unknown_pool_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_arrow_pool.ARROW_POOL_ENV, "tcmalloc")
    with pytest.raises(ConfigError, match="THALWEG_ARROW_POOL.*jemalloc, system, mimalloc, keep"):
        _arrow_pool.install()
