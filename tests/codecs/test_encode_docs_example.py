"""docs/examples/encode.py runs as written and prints what docs/encoders.md shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_encode_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/encode.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith("avro: 0000000001 + ")
    assert out[1] == "round trip equal: True"
    assert out[2] == "header: __value_schema_id"
    assert out[3] == (
        """json: b'{"order_id":"a-2","total":"7.00","created_at":"2026-01-01T11:00:00.000Z","""
        """"coupon":"NEW"}'"""
    )
    assert out[4] == "bytes: [b'\\x00\\x00\\x00\\x00\\x01...', None]"
    assert out[5] == (
        "error: avro encoder: column `order_id` row 1: expected a value (the schema is not "
        "nullable); got null; fix the value or the schema"
    )
