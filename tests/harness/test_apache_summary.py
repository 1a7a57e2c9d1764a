"""The summary line CI greps: "Apache Kafka <version> tests: N passed, N failed, N skipped".

tests/conftest.py counts the tests that ran on Apache Kafka. Under pytest-xdist the
workers run the tests and the controller prints the summary, so the count must come
from the reports the workers send, not from the items: these run a small suite of
tests marked ``apache_kafka`` (no broker: only the marker counts) in a fresh pytest,
alone and on two workers, and read the line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thalweg_bytewax.dev._kafka_jars import KAFKA_VERSION

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.slow  # a fresh pytest, and with -n its workers

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.conftest import (  # the hooks that count and print, as the suite has them
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)
"""

SUITE = """
import pytest

pytestmark = pytest.mark.apache_kafka

@pytest.mark.parametrize("n", range(3))
def test_passes(n):
    pass

def test_fails():
    assert False

def test_skips():
    pytest.skip("no broker")

@pytest.fixture
def broken():
    raise RuntimeError("the broker did not start")

def test_errors_in_setup(broken):
    pass

@pytest.mark.apache_kafka
def test_not_on_kafka_is_not_counted_unless_marked():
    pass
"""

OTHER = """
def test_on_no_broker():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_the_line_counts_every_apache_kafka_test_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("THALWEG_TEST_BROKER", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    apache_kafka: on Apache Kafka\n")
    pytester.makepyfile(test_on_kafka=SUITE, test_other=OTHER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=5, failed=1, skipped=1, errors=1)
    lines = [line for line in result.outlines if line.startswith("Apache Kafka ")]
    # A setup error counts as failed: the test did not pass on the broker.
    assert lines == [f"Apache Kafka {KAFKA_VERSION} tests: 4 passed, 2 failed, 1 skipped"]
    assert not re.search(r"\[gw\d\].*Apache Kafka", result.stdout.str())
