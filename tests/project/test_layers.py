"""The layering holds: the contracts in pyproject.toml's [tool.importlinter], kept and biting.

CI runs ``lint-imports`` beside ruff and mypy; these tests run it too, so ``pytest``
alone catches an import that breaks a layer, and prove on a copy of the package that
each contract fails on the import it forbids.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_IDS = {
    "no-examples",
    "bytewax-above-core",
    "connectors",
    "connector-config-is-core",
    "operators",
    "cli-on-top",
    "flows-on-compiler",
}
# One import per contract that breaks it, in the module named: (contract, module, lines).
BAD = [
    ("no-examples", "cli/_run.py", ["import flows.orders"]),
    ("bytewax-above-core", "pipeline/__init__.py", ["import bytewax.operators"]),
    ("connectors", "runtime/gates.py", ["from thalweg_bytewax.connectors import kafka"]),
    (
        "connector-config-is-core",
        "connectors/parquet/config.py",
        ["from thalweg_bytewax.runtime.epoch_sink import EpochSinkState"],
    ),
    (
        "operators",
        "coverage.py",
        [
            "from typing import TYPE_CHECKING",
            "if TYPE_CHECKING:",
            "    from thalweg_bytewax.operators.batching import _State",
        ],
    ),
    ("cli-on-top", "flows/orders.py", ["def _lazy() -> None:", "    import thalweg_bytewax.cli"]),
    ("flows-on-compiler", "dev/_generated.py", ["from ..flows import orders"]),
]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["COLUMNS"] = "300"  # one line per finding
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_layering_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    # In this process (the fast loop starts none): the package as installed, the
    # contracts of this checkout's pyproject.toml.
    from importlinter.cli import lint_imports as run_lint_imports

    # import-linter configures logging with `disable_existing_loggers`: keep ours as they are
    loggers = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    disabled = [lg.disabled for lg in loggers]
    try:
        code = run_lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        for lg, was in zip(loggers, disabled, strict=True):
            lg.disabled = was
    out = capsys.readouterr().out
    assert code == 0, out[-5000:]
    assert f"Contracts: {len(CONTRACT_IDS)} kept, 0 broken." in out, out


@pytest.mark.slow  # lints a copy of the package in another process
def test_each_contract_fails_on_the_import_it_forbids(tmp_path: Path) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["id"] for c in config["contracts"]} == CONTRACT_IDS == {c for c, _, _ in BAD}
    shutil.copytree(
        ROOT / "thalweg_bytewax",
        tmp_path / "thalweg_bytewax",
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for _, module, lines in BAD:
        with (tmp_path / "thalweg_bytewax" / module).open("a") as f:
            f.write("\n" + "\n".join(lines) + "\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout[-5000:] + done.stderr[-3000:]
    assert f"Contracts: 0 kept, {len(CONTRACT_IDS)} broken." in done.stdout, done.stdout
    for _, module, _ in BAD:
        importer = "thalweg_bytewax." + module.removesuffix(".py").removesuffix("/__init__")
        assert f"{importer.replace('/', '.')} -> " in done.stdout, (module, done.stdout)
