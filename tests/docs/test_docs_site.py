"""The documentation site builds in strict mode, lists every page, and every example runs.

``mkdocs build --strict`` fails on a broken link or anchor, on a page under ``docs/``
missing from the nav (``validation.nav.omitted_files: warn`` in mkdocs.yml) and on an
API reference that does not resolve. The other tests here say the same things faster
and by name: every page is in the nav, every nav entry exists, and every runnable
example under ``docs/examples`` is linked from a page and run by a test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mkdocs.utils.yaml import yaml_load

from tests.docs.test_readme import INSTALL, quickstart_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TESTS = ROOT / "tests"
# A Sphinx cross-reference role as it shows when Markdown renders it: `:class:` then the
# target, in backticks or (once Markdown took them for a code span) in <code>.
LITERAL_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|exc|data|obj):(?:`|&#96;|<code>)")


def _config() -> dict[str, Any]:
    """mkdocs.yml, read the way mkdocs reads it."""
    config: dict[str, Any] = yaml_load((ROOT / "mkdocs.yml").read_text())
    return config


def _nav_pages(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        if not node.startswith(("http://", "https://")):
            yield node
    elif isinstance(node, list):
        for item in node:
            yield from _nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _nav_pages(value)


def _pages() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


def _examples() -> list[Path]:
    return sorted(p for p in (DOCS / "examples").glob("*.py") if p.name != "__init__.py")


def test_every_page_under_docs_is_in_the_nav() -> None:
    nav = list(_nav_pages(_config()["nav"]))
    missing = sorted(_pages() - set(nav))
    assert not missing, f"pages under docs/ missing from the nav in mkdocs.yml: {missing}"


def test_every_nav_entry_is_a_page_and_appears_once() -> None:
    nav = list(_nav_pages(_config()["nav"]))
    assert sorted(set(nav) - _pages()) == [], "nav entries without a page"
    assert len(nav) == len(set(nav)), "a page listed twice in the nav"


def test_the_build_fails_on_a_page_missing_from_the_nav_or_a_bad_link() -> None:
    config = _config()
    assert config["strict"] is True
    assert config["validation"]["nav"]["omitted_files"] == "warn"
    assert config["validation"]["links"]["not_found"] == "warn"
    assert config["validation"]["links"]["anchors"] == "warn"


@pytest.mark.parametrize("example", _examples(), ids=lambda p: p.name)
def test_every_example_is_linked_from_a_page_and_run_by_a_test(example: Path) -> None:
    target = f"examples/{example.name})"
    pages = [p for p in DOCS.rglob("*.md") if target in p.read_text()]
    assert pages, f"no page under docs/ links to docs/examples/{example.name}"
    mention = f"docs/examples/{example.name}"
    tests = [p for p in TESTS.rglob("test_*.py") if mention in p.read_text()]
    assert tests, f"no test under tests/ runs {mention}"


def test_the_getting_started_commands_are_the_tested_quickstart() -> None:
    # tests/docs/test_readme.py runs the README's quickstart verbatim; this page repeats it.
    text = (DOCS / "getting-started.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            steps = [s for s in command.split(" && ") if s.strip() and not INSTALL.search(s)]
            if steps:
                commands.append(" && ".join(steps))
    assert len(commands) >= 6, commands
    readme = quickstart_commands()
    assert [c for c in commands if c not in readme] == []


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "index.html").is_file()
    reference = (tmp_path / "reference" / "kafka" / "index.html").read_text()
    assert 'id="thalweg_bytewax.connectors.kafka.KafkaSource"' in reference
    # The docstrings' Sphinx roles (:class:`X`) are links or code, never literal text.
    literal = {
        page.relative_to(tmp_path).as_posix(): sorted(set(LITERAL_ROLE.findall(page.read_text())))
        for page in tmp_path.rglob("*.html")
    }
    assert {page: roles for page, roles in literal.items() if roles} == {}
    contracts = (tmp_path / "reference" / "contracts" / "index.html").read_text()
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*><code>ContractSpec</code></a>', contracts
    )
