"""Shared test configuration: real-component fixtures, markers and hypothesis profiles."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.fixtures.flows",
    "tests.fixtures.iceberg",
    "tests.fixtures.kafka",
    "tests.fixtures.postgres",
    "tests.fixtures.proxy",
]

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

FIXTURE_MARKERS: dict[str, str] = {
    "kafka_bootstrap": "kafka",
    "make_topic": "kafka",
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
