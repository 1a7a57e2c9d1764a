"""``thalweg dev broker --port N``: the same bootstrap address every run."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from thalweg_bytewax.cli import main

THALWEG = [sys.executable, "-m", "thalweg_bytewax.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _wait_for(path: Path, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.read_text().strip()


def _count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "log_level": 3})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        total = 0
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


@pytest.mark.slow
def test_clients_bootstrap_on_the_chosen_port(tmp_path: Path) -> None:
    port = _free_port()
    broker = subprocess.Popen(
        [*THALWEG, "dev", "broker", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        address = _wait_for(tmp_path / ".thalweg" / "broker")
        assert address == f"127.0.0.1:{port}"
        subprocess.run(
            [*THALWEG, "dev", "produce", "--bootstrap", address, "--count", "40"],
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
            check=True,
        )
        assert _count(address, "orders") == 40  # a second client, through the same port
    finally:
        broker.terminate()
        broker.wait(timeout=20)
    assert broker.returncode == 0


def test_a_taken_port_is_named(tmp_path: Path, capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        address_file = tmp_path / "broker"
        argv = ["dev", "broker", "--port", str(port), "--address-file", str(address_file)]
        assert main(argv) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err
    assert not address_file.exists()


def test_a_port_out_of_range_is_refused(capsys) -> None:
    assert main(["dev", "broker", "--port", "70000"]) == 2
    assert "expected a TCP port, 1..65535" in capsys.readouterr().err
