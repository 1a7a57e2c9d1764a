"""The DLQ and audit rows of ``validate`` are pinned byte for byte on a fixed mixed batch.

The batch mixes every value shape the row JSON must spell (NaN and infinities at the
top level and nested, nulls, unicode and characters JSON escapes, decimals with small
and large scales, instants with and without a zone, dates, times, bytes, lists, structs,
maps, dictionary-encoded and large strings) and rules of both reasons, with and without
locator columns. ``validation_pin.json`` holds the rows the per-row implementation
produced; regenerate it only for an intended change of the DLQ format:
``python -m tests.operators.test_validation_pin``.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from thalweg_bytewax.contracts import Rule, RuleSet
from thalweg_bytewax.contracts.spec import ContractMode
from thalweg_bytewax.operators._validator import Validator
from thalweg_bytewax.records.metadata import MetadataColumns

COLS = MetadataColumns()
GOLDEN = Path(__file__).with_name("validation_pin.json")
NAN, INF = float("nan"), float("inf")
N = 12


def mixed_batch(*, locators: bool = True) -> pa.RecordBatch:
    """A fixed batch of 12 rows over awkward types; most rows break some rule."""
    point = pa.struct([("x", pa.float64()), ("label", pa.string())])
    cols: dict[str, pa.Array] = {
        "id": pa.array(
            [
                "a-1",
                'quote"back\\slash',
                "new\nline\ttab\r\x01\x1f\x7f",
                "ünïcødé ✓ 🚀",
                None,
                "a-1",
                "\u2028sep/slash",
                "x" * 40,
                "",
                "b-2",
                "c-3",
                "d-4",
            ]
        ),
        "n": pa.array([1, -5, 0, 2**62, None, 7, 8, 9, 10, 11, -(2**63), 3], pa.int64()),
        "small": pa.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -128], pa.int8()),
        "x": pa.array(
            [0.5, NAN, INF, -INF, None, -0.0, 1e16, 1e-7, 1e-5, 123456789.123, 5e-324, 1e22]
        ),
        "f32": pa.array(
            [0.1, 1.5, NAN, -INF, None, 3.4e38, 1e-7, 2.0, 0.0, 7.25, 1.0, 16777217.0],
            pa.float32(),
        ),
        "amount": pa.array(
            [Decimal(v) if v is not None else None for v in
             ["1.50", "-2.00", "0.00", "999999.99", None, "0.01", "-0.01", "10.10", "5",
              "12.34", "0", "7.77"]],
            pa.decimal128(12, 2),
        ),
        "tiny": pa.array(
            [Decimal(v) if v is not None else None for v in
             ["0.00000001", "0E-8", "1.00000000", None, "-0.00000123", "123.45678901",
              "0.00000100", "2", "3", "4", "5", "6"]],
            pa.decimal128(20, 8),
        ),
        "at": pa.array(
            [datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC) + timedelta(hours=i)
             if i != 4 else None for i in range(N)],
            pa.timestamp("ms", tz="UTC"),
        ),
        "local": pa.array(
            [datetime(1999, 12, 31, 23, 59, 59, 999999 if i % 2 else 0) + timedelta(days=i)
             for i in range(N)],
            pa.timestamp("us"),
        ),
        "day": pa.array([date(2024, 2, 29) + timedelta(days=i) for i in range(N)]),
        "clock": pa.array([time(1, 2, 3, 4000 * i) for i in range(N)], pa.time64("us")),
        "ok": pa.array([True, False, None, True, True, False, True, True, True, True, True, True]),
        "blob": pa.array([b"\x00\xff", None, b"", b"abc"] * 3, pa.binary()),
        "tags": pa.array(
            [["a", "b"], [], None, ["ü", None], ["x"], ["y"], ["z"], ["\""], ["q"], ["r"],
             ["s"], ["t"]],
            pa.list_(pa.string()),
        ),
        "pts": pa.array(
            [[{"x": NAN, "label": "n"}], None, [{"x": 1.0, "label": None}], [None],
             [{"x": -INF, "label": "m"}, {"x": 2.5, "label": "é"}], [], [{"x": 0.0,
              "label": "z"}], [{"x": 1e16, "label": "e"}], [], [], [], []],
            pa.list_(point),
        ),
        "where": pa.array(
            [{"x": INF, "label": "a"}, None, {"x": None, "label": "b\n"}]
            + [{"x": float(i), "label": str(i)} for i in range(3, N)],
            point,
        ),
        "attrs": pa.array(
            [[("k", NAN), ("j", 1.0)], None, [], [("ü", -INF)]] + [[("a", 1.5)]] * 8,
            pa.map_(pa.string(), pa.float64()),
        ),
        "kind": pa.array(["red", "blue", None, "red"] * 3).dictionary_encode(),
        "big": pa.array(["é" * 3, None, "long"] * 4, pa.large_string()),
        "fixed": pa.array([[1.0, NAN]] * N, pa.list_(pa.float64(), 2)),
    }
    if locators:
        cols[COLS.source_topic] = pa.array(["orders"] * 6 + ["returns"] * 6)
        cols[COLS.source_partition] = pa.array([0, 1, 2] * 4, pa.int32())
        cols[COLS.source_offset] = pa.array(range(100, 100 + N), pa.int64())
        cols[COLS.record_id] = pa.array([i.to_bytes(16, "big") for i in range(N)], pa.binary(16))
        cols[COLS.source_key] = pa.array([b"k%d" % i if i % 3 else None for i in range(N)])
        cols[COLS.source_value] = pa.array([b"\x00\x00\x00\x00\x01v%d" % i for i in range(N)])
    return pa.RecordBatch.from_pydict(cols)


RULES = [
    Rule.not_null("id"),
    Rule.unique("id"),
    Rule.length("id", None, 30),
    Rule.between("x", 0, 1e20),
    Rule.ge("n", 0),
    Rule.one_of("kind", ["red", "blue"]),
    Rule.of_type("small", "int64"),
    Rule.sql("ok_or_tagged", "ok OR len(tags) > 0"),
    Rule.matches("big", "^[a-zé]+$"),
    Rule.between("amount", -1, 1000),
]


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return "hex:" + value.hex()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _rows(batch: pa.RecordBatch | None, skip: str) -> list[dict[str, Any]]:
    if batch is None:
        return []
    keep = [n for n in batch.schema.names if n != skip]
    return [{k: _plain(v) for k, v in r.items()} for r in batch.select(keep).to_pylist()]


def pinned_outputs() -> dict[str, Any]:
    """The DLQ rows (minus ``rejected_at``) and audit rows (minus ``evaluated_at``)."""
    out: dict[str, Any] = {}
    for locators in (True, False):
        batch = mixed_batch(locators=locators)
        validator = Validator("pin", RuleSet(RULES), ContractMode.QUARANTINE, COLS)
        verdict = validator.run(batch)
        name = "with_locators" if locators else "without_locators"
        out[name] = {
            "dlq": _rows(verdict.rejected, "rejected_at"),
            "dlq_schema": str(verdict.rejected.schema) if verdict.rejected is not None else "",
            "audit": _rows(verdict.audit, "evaluated_at"),
            "clean": verdict.clean.num_rows if verdict.clean is not None else 0,
        }
    return out


def test_dlq_and_audit_rows_are_byte_identical_to_the_pinned_rows():
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(pinned_outputs()))
    for name in expected:
        assert got[name]["dlq_schema"] == expected[name]["dlq_schema"]
        assert got[name]["clean"] == expected[name]["clean"]
        assert len(got[name]["dlq"]) == len(expected[name]["dlq"])
        for g, e in zip(got[name]["dlq"], expected[name]["dlq"], strict=True):
            assert g == e
        assert got[name]["audit"] == expected[name]["audit"]
    assert got == expected


if __name__ == "__main__":
    GOLDEN.write_text(
        json.dumps(pinned_outputs(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
