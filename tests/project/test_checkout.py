"""Run from a source checkout, connectors and operators import as they do installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_bare_checkout_imports_its_connectors_and_operators() -> None:
    # `python -m bytewax.run flows.orders` from the root of a checkout imports the package
    # from the working directory. -S: no site hooks (so not this checkout's editable
    # install); the dependencies come from this environment's site-packages.
    deps = [p for p in sys.path if p.endswith("site-packages")]
    probe = (
        "import thalweg_bytewax.operators as twg\n"
        "from thalweg_bytewax.connectors.kafka import KafkaSource\n"
        "import sys\n"
        "print(twg.__file__, sys.modules[KafkaSource.__module__].__file__, twg.decode)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(deps)
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    operators, source, _ = done.stdout.split(maxsplit=2)
    assert Path(operators) == ROOT / "thalweg_bytewax" / "operators" / "__init__.py"
    assert Path(source) == ROOT / "thalweg_bytewax" / "connectors" / "kafka" / "source.py"


def test_the_real_package_imports_its_operators_and_connectors() -> None:
    import thalweg_bytewax.connectors.kafka
    import thalweg_bytewax.operators

    assert hasattr(thalweg_bytewax.operators, "decode")
    assert hasattr(thalweg_bytewax.connectors.kafka, "KafkaSource")
