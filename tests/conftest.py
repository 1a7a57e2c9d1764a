"""Shared test configuration: real-component fixtures, markers and hypothesis profiles."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings

from tests.fixtures.budget import PROFILE

pytest_plugins = [
    "tests.fixtures.crash",
    "tests.fixtures.flows",
    "tests.fixtures.iceberg",
    "tests.fixtures.kafka",
    "tests.fixtures.postgres",
    "tests.fixtures.processes",
    "tests.fixtures.proxy",
]

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(PROFILE)

FIXTURE_MARKERS: dict[str, str] = {
    "kafka_bootstrap": "kafka",
    "make_topic": "kafka",
    "apache_kafka": "apache_kafka",
    "apache_kafka_factory": "apache_kafka",
    "apache_kafka_jars": "apache_kafka",
    "pg_dsn": "postgres",
    "pg_schema": "postgres",
}
"""A test using one of these fixtures (directly or through another fixture) gets the
marker, so `-m "not kafka"` or `-m "not postgres"` deselects it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the real services its fixtures need."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for name in sorted({m for f, m in FIXTURE_MARKERS.items() if f in used}):
            item.add_marker(name)
            if name == "apache_kafka":
                item.add_marker("kafka")


APACHE_OUTCOMES: Counter[str] = Counter()
"""Outcomes of the tests that ran on Apache Kafka, for the summary line CI greps."""

ON_APACHE = "thalweg_on_apache_kafka"
"""The attribute a test's report carries when the test ran on Apache Kafka. Under
pytest-xdist the reports are made in the workers and sent to the controller, which
prints the summary; an attribute of the report travels with it, the item does not."""


def _on_apache_kafka(item: pytest.Item) -> bool:
    if item.get_closest_marker("apache_kafka") is not None:
        return True
    from tests.fixtures.kafka import BROKER_ENV

    apache = os.environ.get(BROKER_ENV) == "apache" and not os.environ.get("THALWEG_TEST_KAFKA")
    return apache and item.get_closest_marker("kafka") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Mark the report of each test that ran on Apache Kafka (see ``ON_APACHE``)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if _on_apache_kafka(item):
        setattr(report, ON_APACHE, True)
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count each Apache Kafka test once: its call's outcome, or its setup's if it skipped.

    Called in the process that runs the test and, under pytest-xdist, again in the
    controller with the worker's report: the controller's count is the one it prints.
    """
    if not getattr(report, ON_APACHE, False):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        APACHE_OUTCOMES[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line CI logs show: how many tests ran on Apache Kafka, and how many skipped."""
    from thalweg_bytewax.dev._kafka_jars import KAFKA_VERSION

    if not APACHE_OUTCOMES:
        return
    counts = ", ".join(f"{APACHE_OUTCOMES[k]} {k}" for k in ("passed", "failed", "skipped"))
    terminalreporter.write_line(f"Apache Kafka {KAFKA_VERSION} tests: {counts}")
