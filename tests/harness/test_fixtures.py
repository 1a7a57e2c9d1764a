"""The real-component fixtures themselves: a Kafka broker and a PostgreSQL server."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.fixtures.proxy import Proxy


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


def test_the_proxy_passes_a_server_closing_its_side_on_to_the_client() -> None:
    # A server that ends the session (PostgreSQL terminating a backend) must look the
    # same through the proxy: its last bytes, then the end of the stream, not an open
    # connection that never answers (a sink would wait out its write timeout).
    server = socket.create_server(("127.0.0.1", 0))
    proxy = Proxy(server.getsockname())
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        upstream, _ = server.accept()
        client.sendall(b"ping")
        assert upstream.recv(4) == b"ping"
        upstream.sendall(b"bye")
        upstream.close()
        client.settimeout(20)  # far above what it takes: a hang fails, not blocks
        got = b""
        while chunk := client.recv(64):
            got += chunk
        assert got == b"bye"
        client.close()
    finally:
        proxy.close()
        server.close()
