"""Every listener of an Apache Kafka cluster gets a port of its own."""

from __future__ import annotations

from pathlib import Path

from thalweg_bytewax.dev._apache_kafka import ApacheKafka, free_ports


def test_picked_ports_are_distinct_even_when_many_are_asked_for() -> None:
    for _ in range(50):
        ports = free_ports(8)
        assert len(set(ports)) == 8


def test_no_picked_port_is_one_the_caller_fixed() -> None:
    fixed = free_ports(1)[0]
    for _ in range(50):
        assert fixed not in free_ports(4, avoid=frozenset({fixed}))


def test_each_node_has_a_client_and_a_controller_port_no_other_listener_shares(
    tmp_path: Path,
) -> None:
    # A broker whose client and controller listeners share a port refuses to format its
    # storage; ports picked one socket at a time could come back equal.
    for _ in range(20):
        kafka = ApacheKafka(tmp_path / "jars", tmp_path / "home", nodes=3)
        ports = [p for n in kafka.nodes for p in (n.port, n.controller_port)]
        assert len(set(ports)) == 6


def test_a_fixed_client_port_is_kept_and_not_reused_for_a_controller(tmp_path: Path) -> None:
    fixed = free_ports(1)[0]
    kafka = ApacheKafka(tmp_path / "jars", tmp_path / "home", nodes=2, port=fixed)
    assert kafka.nodes[0].port == fixed
    ports = [p for n in kafka.nodes for p in (n.port, n.controller_port)]
    assert len(set(ports)) == 4
