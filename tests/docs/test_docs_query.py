"""docs/query.md: its example commands run as written and print what the page shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "query.md"


def _example() -> tuple[list[str], str]:
    """The page's example commands, and the first output block after them."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- docs-example: query -->\n```bash\n(.*?)```(.*?)```text\n(.*?)```", text, re.S
    )
    assert found, f"{PAGE} lost its example block"
    return found.group(1).splitlines(), found.group(3)


@pytest.mark.slow
def test_the_query_page_example_runs_and_prints_what_it_shows(tmp_path: Path) -> None:
    commands, shown = _example()
    assert commands[0].endswith("thalweg run orders")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    outputs = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"`{command}` failed: {done.stderr}"
        outputs.append(done.stdout)
    assert "sales.orders  Iceberg table" in outputs[1]
    assert outputs[2] == shown  # the rejects by reason, exactly as the page shows them
    assert "currency_pattern@" in outputs[3]  # the failed rule ids of a dq reject
    assert re.search(r"│ (\d+) +│ \1 +│", outputs[4]), outputs[4]  # every order has its raw record
    assert outputs[5].splitlines()[0] == "status,orders"
