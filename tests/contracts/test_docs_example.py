"""The runnable example of docs/contracts.md runs and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import os
import re

from tests.contracts.orders_data import ROOT


def test_docs_example_runs(monkeypatch):
    text = (ROOT / "docs" / "contracts.md").read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match is not None, "no python example in docs/contracts.md"
    code = match.group(1)
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/contracts.md", "exec"), {"__name__": "docs_example"})  # noqa: S102
    lines = out.getvalue().splitlines()
    assert lines[0] == "7 clean; 2 in the DLQ"
    assert lines[1].endswith("record x rule verdicts")
    assert lines[2] == "7 passed with a warning"  # a warning rule reports, rejects nothing
    assert os.path.exists(ROOT / "thalweg_bytewax" / "flows" / "contracts" / "orders.odcs.yaml")
