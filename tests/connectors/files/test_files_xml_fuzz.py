"""The XML reader fuzzed: no crash, no escaped exception, bounded memory, nothing lost.

The committed corpus (seeds and their mutations, tests/fixtures/xml_corpus) and large
generated attacks are read in a subprocess whose address space is capped
(``RLIMIT_AS``, see tests/connectors/files/xml_fuzz.py); generated record trees are read in
process and every value written is found in the rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.connectors.files.test_files_xml import read
from tests.connectors.files.xml_fuzz import CORPUS, attacks

ROOT = Path(__file__).resolve().parents[3]
CAP_MIB = 768  # address space the reader may add to a started process


def run_capped(paths: list[Path]) -> list[dict[str, Any]]:
    """Each file read under the cap; the process must end well and report every file."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.connectors.files.xml_fuzz", str(CAP_MIB), *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["file"] for r in results] == [p.name for p in paths]
    return results


@pytest.mark.slow
def test_the_committed_corpus_reads_under_a_memory_cap() -> None:
    paths = sorted(CORPUS.glob("*.xml"))
    assert len(paths) > 100
    results = run_capped(paths)
    escaped = [(r["file"], r["error"]) for r in results if r["error"] is not None]
    assert escaped == []
    # Every file ends in rows or DLQ rows, or is a well-formed file without records.
    silent = [r["file"] for r in results if r["rows"] == 0 and r["bad"] == 0]
    assert set(silent) <= {"empty_root.xml", "no_records.xml", "record_is_root.xml"} | {
        f for f in silent if "-m" in f
    }
    seeds = {r["file"]: r for r in results if "-m" not in r["file"]}
    assert seeds["plain.xml"]["rows"] == 40 and seeds["plain.xml"]["bad"] == 0
    for attack in ("xxe.xml", "xxe_param.xml", "laughs.xml", "quadratic.xml"):
        assert seeds[attack]["rows"] == 0 and seeds[attack]["bad"] == 2


@pytest.mark.slow
def test_large_attacks_are_bounded_under_a_memory_cap(tmp_path: Path) -> None:
    results = run_capped(attacks(tmp_path))
    assert [(r["file"], r["error"]) for r in results if r["error"] is not None] == []
    by_name = {r["file"]: r for r in results}
    for refused in (
        "deep.xml",
        "wide.xml",
        "wide_names.xml",
        "attributes.xml",
        "long_text.xml",
        "prolog_comment.xml",
        "unclosed.xml",
    ):
        assert by_name[refused]["bad"] == 2, refused  # once inferred, once with a schema
    assert by_name["many_records.xml"]["rows"] == 400_000
    assert by_name["big_records.xml"]["rows"] == 16


NAMES = st.sampled_from(["a", "b", "c"])
TEXT = st.text(alphabet="xyz019", min_size=1, max_size=4)


def _element(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return st.tuples(NAMES, st.dictionaries(NAMES, TEXT, max_size=2), TEXT)
    return st.tuples(
        NAMES,
        st.dictionaries(NAMES, TEXT, max_size=2),
        st.one_of(TEXT, st.lists(_element(depth - 1), min_size=1, max_size=3)),
    )


def _xml(elem: Any) -> str:
    name, attrs, body = elem
    attr = "".join(f' {k}="{v}"' for k, v in attrs.items())
    inner = body if isinstance(body, str) else "".join(map(_xml, body))
    return f"<{name}{attr}>{inner}</{name}>"


def _written(elem: Any) -> list[str]:
    _, attrs, body = elem
    texts = list(attrs.values())
    return texts + ([body] if isinstance(body, str) else [t for e in body for t in _written(e)])


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@given(st.lists(st.lists(_element(2), max_size=4), min_size=1, max_size=5))
def test_every_value_written_is_read_back(tmp_path_factory: Any, records: list[Any]) -> None:
    path = tmp_path_factory.mktemp("xml") / "o.xml"
    body = "".join("<order>" + "".join(map(_xml, kids)) + "</order>" for kids in records)
    path.write_text(f"<orders>{body}</orders>")
    ok, bad = read(path)
    assert bad == []
    assert [r["_twg_source_offset"] for r in ok] == list(range(len(records)))
    for kids, row in zip(records, ok, strict=True):
        got = sorted(_strings({k: v for k, v in row.items() if not k.startswith("_twg_")}))
        assert got == sorted(t for e in kids for t in _written(e))
