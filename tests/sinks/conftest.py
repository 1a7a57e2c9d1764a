"""The ``table_sink`` fixture: every case of the suite runs on each of the six sinks.

Following pyiceberg's ``catalog`` fixture over its catalog factories, each parameter
builds a :class:`~tests.sinks.targets.SinkTarget` on a fresh target: a lane directory,
a warehouse, a PostgreSQL schema (pgserver, or ``THALWEG_TEST_PG_DSN``), an Arrow IPC
directory, a Kafka topic (librdkafka's mock cluster, or ``THALWEG_TEST_KAFKA``), a Flight
target (the reference ``TableServer`` on a free localhost port). The
services start only for the parameters that need them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sinks.targets import (
    ArrowIPCTarget,
    FlightTarget,
    IcebergTarget,
    KafkaTarget,
    ParquetTarget,
    PostgresTarget,
    SinkTarget,
)

SINKS = ("parquet", "iceberg", "postgres", "arrow_ipc", "kafka", "flight")
"""Every sink the suite runs (Parquet lane, Iceberg table, PostgreSQL table, Arrow IPC
directory, Kafka topic, Arrow Flight target)."""


TARGETS: dict[str, type[SinkTarget]] = {
    "parquet": ParquetTarget,
    "iceberg": IcebergTarget,
    "postgres": PostgresTarget,
    "arrow_ipc": ArrowIPCTarget,
    "kafka": KafkaTarget,
    "flight": FlightTarget,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run a case marked ``capability(name)`` only on the sinks that have it by design."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("capability")
        callspec = getattr(item, "callspec", None)
        sink = callspec.params.get("table_sink") if callspec is not None else None
        if marker is not None and sink is not None and not getattr(TARGETS[sink], marker.args[0]):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def build_target(name: str, request: pytest.FixtureRequest, root: Path) -> SinkTarget:
    """A fresh target of sink ``name`` (starts PostgreSQL, Kafka only for theirs)."""
    if name == "parquet":
        return ParquetTarget(root)
    if name == "iceberg":
        return IcebergTarget(root)
    if name == "arrow_ipc":
        return ArrowIPCTarget(root)
    if name == "flight":
        return FlightTarget(root)
    if name == "kafka":
        request.node.add_marker("kafka")  # as if the test used `kafka_bootstrap` itself
        make_topic = request.getfixturevalue("make_topic")
        return KafkaTarget(request.getfixturevalue("kafka_bootstrap"), make_topic())
    request.node.add_marker("postgres")  # as if the test used `pg_dsn` itself
    return PostgresTarget(request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema"))


@pytest.fixture(params=SINKS)
def table_sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SinkTarget]:
    """A table sink on a fresh target, with ``make``, ``read``, ``columns`` and flags."""
    target = build_target(request.param, request, tmp_path)
    try:
        yield target
    finally:
        target.close()
