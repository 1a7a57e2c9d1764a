"""The real-component fixtures themselves: a Kafka broker and a PostgreSQL server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer


def test_kafka_fixture_is_a_wire_protocol_broker(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> None:
    # tests/conftest.py marks tests by the fixtures they use.
    assert request.node.get_closest_marker("kafka") is not None
    assert request.node.get_closest_marker("postgres") is None
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "probe"})
    try:
        md = consumer.list_topics(timeout=10)
        assert md.brokers, "no broker answered the metadata request"
    finally:
        consumer.close()


def test_postgres_fixture_is_a_real_server(
    pg_dsn: str, pg_schema: str, request: pytest.FixtureRequest
) -> None:
    import psycopg

    assert request.node.get_closest_marker("postgres") is not None
    assert request.node.get_closest_marker("kafka") is None

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        version = conn.execute("show server_version_num").fetchone()
        assert version is not None and int(version[0]) >= 140000
        conn.execute(f'create table "{pg_schema}".t (x int)')
        conn.execute(f'insert into "{pg_schema}".t values (1), (2)')
        assert conn.execute(f'select sum(x) from "{pg_schema}".t').fetchone() == (3,)


def test_the_apache_kafka_fixture_is_a_kraft_broker_with_four_partition_topics(
    apache_kafka: Any, request: pytest.FixtureRequest
) -> None:
    from confluent_kafka.admin import AdminClient

    from tests.fixtures.kafka import create_topic, topic_name

    assert request.node.get_closest_marker("apache_kafka") is not None
    assert request.node.get_closest_marker("kafka") is not None
    topic = topic_name(request)
    create_topic(apache_kafka.bootstrap, topic)  # CreateTopics answers (the mock's hangs)
    md = AdminClient({"bootstrap.servers": apache_kafka.bootstrap}).list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 4
    assert md.controller_id == 1  # a KRaft controller, the node itself


@pytest.mark.parametrize("required", [False, True])
def test_without_java_the_apache_kafka_tests_skip_or_under_ci_fail(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, required: bool
) -> None:
    import tests.fixtures.kafka as fixtures

    monkeypatch.setenv("PATH", str(tmp_path))  # neither java nor mvn
    monkeypatch.setattr(fixtures, "JAR_CACHE", tmp_path / "cache")
    if required:
        monkeypatch.setenv(fixtures.REQUIRE_ENV, "1")
        with pytest.raises(pytest.fail.Exception, match=r"needs java and mvn on the PATH.*=1"):
            fixtures._jars()
    else:
        monkeypatch.delenv(fixtures.REQUIRE_ENV, raising=False)
        with pytest.raises(pytest.skip.Exception, match=r"Apache Kafka 4\.\d+\.\d+ needs java"):
            fixtures._jars()
