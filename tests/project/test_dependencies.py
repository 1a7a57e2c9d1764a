"""What a plain ``pip install thalweg-bytewax`` brings, and what stays optional.

A user's install (and a container image) gets the base dependencies only: the
packages the project is defined by — Iceberg, PostgreSQL and metrics included — must
be among them, so that the flagship flow runs without naming an extra.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import MissingDependencyError

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_packages_the_flagship_flow_runs_on_are_plain_dependencies() -> None:
    base = names(PROJECT["dependencies"])
    for package in (
        "bytewax",
        "confluent-kafka",
        "duckdb",
        "open-data-contract-standard",
        "pyiceberg",
        "psycopg",
        "adbc-driver-postgresql",
        "opentelemetry-sdk",
        "opentelemetry-exporter-prometheus",
        "prometheus-client",
    ):
        assert package in base, f"{package} is needed by the flagship flow but is an extra"


def test_extras_hold_only_what_is_truly_optional() -> None:
    extras = PROJECT["optional-dependencies"]
    optional = {
        "files": {"python-calamine", "lxml", "fsspec"},
        "proto": {"grpcio-tools"},
        "otlp": {"opentelemetry-exporter-otlp-proto-http"},
        "wasm": {"wasmtime"},
        "dev": {"pgserver"},
    }
    for extra, packages in optional.items():
        assert names(extras[extra]) == packages, extra
    # The extras of earlier releases stay, empty, so that old install lines still work.
    for retired in ("fast", "sql", "iceberg", "postgres", "observability", "contracts"):
        assert extras[retired] == [], retired


@pytest.mark.parametrize(
    ("extra", "hint"),
    [
        ("iceberg", 'pip install "thalweg-bytewax"'),
        ("files", 'pip install "thalweg-bytewax[files]"'),
        ("wasm", 'pip install "thalweg-bytewax[wasm]"'),
    ],
)
def test_a_missing_module_names_what_installs_it(extra: str, hint: str) -> None:
    with pytest.raises(MissingDependencyError) as caught:
        require("thalweg_no_such_module", extra=extra)
    assert hint in str(caught.value)
    assert "`thalweg_no_such_module` is not installed" in str(caught.value)


def test_ci_runs_the_suite_on_every_python_the_project_names() -> None:
    versions = [
        c.rsplit(" :: ", 1)[1]
        for c in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions, "pyproject names no Python version"
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    for version in versions:
        assert f"python{version}" in ci, f"CI does not run the tests on Python {version}"
        assert version in readme, f"the README does not name Python {version}"
    # The oldest releases are resolved from pyproject's own bounds, each run.
    assert "--resolution lowest-direct" in ci
