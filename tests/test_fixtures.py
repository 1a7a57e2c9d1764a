"""The real-component fixtures themselves: a Kafka broker and a PostgreSQL server."""

from __future__ import annotations

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
