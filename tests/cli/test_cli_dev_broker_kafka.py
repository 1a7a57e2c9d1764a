"""`thalweg dev broker --kafka`: Apache Kafka for users with Java, as they run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.fixtures.kafka import JAR_CACHE
from thalweg_bytewax.cli import main

pytestmark = pytest.mark.slow


def test_dev_broker_kafka_serves_publishes_its_address_and_withdraws_it(
    apache_kafka_jars: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address = tmp_path / ".thalweg" / "broker"
    env = {**os.environ, "THALWEG_KAFKA_CACHE": str(JAR_CACHE)}
    command = [sys.executable, "-m", "thalweg_bytewax.cli", "dev", "broker", "--kafka"]
    command += ["--address-file", str(address), "--data-dir", str(tmp_path / "kafka")]
    proc = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not address.is_file():
            assert proc.poll() is None, "the broker exited before it published its address"
            assert time.monotonic() < deadline, "no address published within 180 s"
            time.sleep(0.5)
        bootstrap = address.read_text().strip()
        assert main(["dev", "produce", "--bootstrap", bootstrap, "--topic", "orders",
                     "--count", "1000"]) == 0  # fmt: skip
        assert "produced 1,000 sample orders" in capsys.readouterr().out
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("orders", timeout=10)
        assert len(md.topics["orders"].partitions) == 4  # auto-created, as on the mock
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert "Apache Kafka 4." in out
    assert not address.exists()  # withdrawn on a clean stop
