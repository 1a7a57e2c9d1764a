"""What a user's ``pip install`` gets: the wheel and the sdist, built as a release is.

The wheel is built from the sdist (``python -m build``), so both are checked at once: it
holds every package of ``thalweg_bytewax``, the bundled flow's data, and no top-level
``flows`` package that would shadow a user's own. Installed into a fresh virtualenv outside the checkout, ``thalweg --help``
and ``thalweg run orders`` work. The install here is ``--no-deps`` with this
environment's site-packages on a ``.pth`` (for speed); CI installs each for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.workers import built_once

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(
    argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    clean.pop("PYTHONPATH", None)
    done = subprocess.run(
        argv,
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    # The wheel is built from the sdist, as users and the image get it: a checkout's own
    # build/ directory (stale modules of an earlier layout) cannot leak into it. Once per
    # run, also on pytest-xdist workers: the build writes its metadata into the checkout.
    out = built_once(
        tmp_path_factory,
        "dist",
        lambda out: _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)]),
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def expected_modules() -> set[str]:
    """Every module of the source tree under the path it is installed at."""
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "thalweg_bytewax").rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_the_wheel_holds_every_module_and_the_bundled_data_and_no_flows(
    dists: tuple[Path, Path],
) -> None:
    wheel, _ = dists
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {n for n in names if n.endswith(".py")}
    assert modules == expected_modules(), (
        f"missing: {sorted(expected_modules() - modules)}; "
        f"unexpected: {sorted(modules - expected_modules())}"
    )
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"thalweg_bytewax", wheel.name.split("-")[0] + "-0.1.0.dist-info"}, top
    assert "flows/__init__.py" not in names
    for data in (
        "thalweg_bytewax/py.typed",
        "thalweg_bytewax/flows/orders.toml",
        "thalweg_bytewax/flows/schemas/1.avsc",
        "thalweg_bytewax/flows/contracts/orders.odcs.yaml",
        "thalweg_bytewax/codecs/_json_native.pyi",
        "thalweg_bytewax/dev/apache_kafka_pom.xml",
    ):
        assert data in names, data
    assert any(n.startswith("thalweg_bytewax/_record_ids.") and n.endswith(".so") for n in names)
    assert any(
        n.startswith("thalweg_bytewax/codecs/_avro_native.") and n.endswith(".so") for n in names
    )


def test_the_sdist_holds_what_a_build_needs(dists: tuple[Path, Path]) -> None:
    _, sdist = dists
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in (
        "setup.py",
        "pyproject.toml",
        "README.md",
        "thalweg_bytewax/connectors/kafka/__init__.py",
        "thalweg_bytewax/operators/__init__.py",
        "thalweg_bytewax/_record_ids.c",
        "thalweg_bytewax/codecs/_avro_native.c",
        "thalweg_bytewax/codecs/_body_offsets.h",
        "thalweg_bytewax/flows/orders.toml",
    ):
        assert needed in names, needed


def test_the_installed_wheel_runs_thalweg_and_the_flagship_outside_the_checkout(
    dists: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, _ = dists
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          str(wheel)])  # fmt: skip
    # The dependencies come from this environment's site-packages (not its .pth hooks,
    # so not this checkout's editable install).
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site.stdout.strip()) / "deps.pth").write_text("\n".join(ours) + "\n")
    assert sysconfig.get_path("purelib") in ours
    work = tmp_path / "work"
    work.mkdir()

    where = _run([str(python), "-c", "import thalweg_bytewax; print(thalweg_bytewax.__file__)"],
                 cwd=work)  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout
    shadow = subprocess.run(
        [str(python), "-c", "import flows"], cwd=work, capture_output=True, text=True, check=False
    )
    assert "No module named 'flows'" in shadow.stderr, "the wheel installs a top-level flows"

    helped = _run([str(venv / "bin" / "thalweg"), "--help"], cwd=work)
    assert "{" in helped.stdout and "run" in helped.stdout and "batch" in helped.stdout
    ran = _run([str(venv / "bin" / "thalweg"), "run", "orders"], cwd=work,
               env={"THALWEG_SAMPLE_ORDERS": "300"})  # fmt: skip
    assert "  raw lane thalweg-data/raw: 300 records (+300)" in ran.stdout, ran.stdout
    assert "table sales.orders (iceberg thalweg-data/warehouse)" in ran.stdout
