"""``thalweg coverage --plot``: the SVG shows each sink's ranges, and its gaps in red."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from thalweg_bytewax.cli import main
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.store import SqliteCoverageStore

SVG = "{http://www.w3.org/2000/svg}"


def _store(tmp_path: Path) -> Path:
    store = SqliteCoverageStore(tmp_path / "c.sqlite3")
    store.record(
        "f.raw_lane",
        {("orders", 0): OffsetCoverage([(0, 99)]), ("orders", 1): OffsetCoverage([(0, 9)])},
    )
    store.record("f.orders", {("orders", 0): OffsetCoverage([(0, 39), (60, 79)])})
    store.record("f.lines", {("orders", 0): OffsetCoverage([(0, 99)])})
    return store.path


def _rects(svg: Path) -> list[dict[str, str]]:
    root = ET.parse(svg).getroot()  # noqa: S314 - the file this test just wrote
    return [r.attrib for r in root.iter(f"{SVG}rect") if "data-sink" in r.attrib]


def _spans(rects: list[dict[str, str]], sink: str, kind: str, partition: int) -> list[tuple]:
    return sorted(
        (int(r["data-first"]), int(r["data-last"]))
        for r in rects
        if r["data-sink"] == sink and r["class"] == kind and r["data-partition"] == str(partition)
    )


def test_the_svg_draws_ranges_and_the_gaps_against_the_raw_lane(tmp_path: Path, capsys) -> None:
    svg = tmp_path / "coverage.svg"
    argv = ["coverage", str(_store(tmp_path)), "--raw-lane", "f.raw_lane", "--plot", str(svg)]
    assert main(argv) == 0
    assert f"to `{svg}`" in capsys.readouterr().err
    rects = _rects(svg)
    assert _spans(rects, "f.raw_lane", "raw", 0) == [(0, 99)]
    assert _spans(rects, "f.orders", "covered", 0) == [(0, 39), (60, 79)]
    assert _spans(rects, "f.orders", "gap", 0) == [(40, 59), (80, 99)]  # the hole and the tail
    assert _spans(rects, "f.lines", "gap", 0) == []
    # Partition 1: neither sink recorded it, so each lacks all the raw lane holds.
    assert _spans(rects, "f.orders", "gap", 1) == [(0, 9)]
    assert _spans(rects, "f.lines", "gap", 1) == [(0, 9)]
    fills = {r["class"]: r["fill"] for r in rects}
    assert fills["gap"] not in (fills["covered"], fills["raw"])
    # On the partition's axis (0..99 over the same width), the gap sits where 40..59 is.
    gap = next(r for r in rects if r["data-sink"] == "f.orders" and r["data-first"] == "40")
    whole = next(r for r in rects if r["data-sink"] == "f.raw_lane" and r["data-partition"] == "0")
    scale = float(whole["width"]) / 100
    assert float(gap["x"]) == pytest.approx(float(whole["x"]) + 40 * scale, abs=0.01)
    assert float(gap["width"]) == pytest.approx(20 * scale, abs=0.01)


def test_without_a_raw_lane_gaps_are_the_holes_between_ranges(tmp_path: Path) -> None:
    svg = tmp_path / "coverage.svg"
    assert main(["coverage", str(_store(tmp_path)), "--sink", "f.orders", "--plot", str(svg)]) == 0
    rects = _rects(svg)
    assert {r["data-sink"] for r in rects} == {"f.orders"}
    assert _spans(rects, "f.orders", "gap", 0) == [(40, 59)]


def test_json_stays_parseable_beside_a_plot(tmp_path: Path, capsys) -> None:
    svg = tmp_path / "c.svg"
    assert main(["coverage", str(_store(tmp_path)), "--json", "--plot", str(svg)]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"]
    assert svg.is_file()
