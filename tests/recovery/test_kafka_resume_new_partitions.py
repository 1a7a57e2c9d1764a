"""A flow resumed after its topic gained partitions reads them from their start.

The first run lists partitions 0 and 1 only (the topic's size back then; the mock
cluster cannot add partitions), with ``starting_offset="latest"``. Records are written
to all four partitions while the flow is down; the resumed flow must read every one of
them, including those of partitions 2 and 3 that it has no state for.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, run_main
from typing_extensions import override

from tests.helpers import located
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.testing import produce


class _FirstRunSource(KafkaSource):
    """The source as it listed the topic when it had two partitions."""

    @override
    def list_parts(self) -> list[str]:
        return [k for k in super().list_parts() if k.endswith((":0", ":1"))]


def run(source: KafkaSource, recovery: Path) -> list[tuple[int, int]]:
    out: list[Any] = []
    flow = Dataflow("new_partitions")
    op.output("out", op.input("in", flow, source), TestingSink(out))
    run_main(flow, epoch_interval=timedelta(seconds=0.2), recovery_config=RecoveryConfig(str(recovery)))
    return sorted(loc for _, b in out for loc in located(b))


def test_partitions_without_state_after_a_resume_start_at_earliest(
    kafka_bootstrap: str, make_topic: Any, tmp_path: Path
) -> None:
    topic = make_topic()
    produce(kafka_bootstrap, topic, [{"value": b"old", "partition": p} for p in range(4)])
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    first = _FirstRunSource([kafka_bootstrap], [topic], tail=False, starting_offset="latest")
    assert run(first, recovery) == []  # "latest": nothing yet
    produce(kafka_bootstrap, topic, [{"value": b"new", "partition": p} for p in range(4)])
    source = KafkaSource([kafka_bootstrap], [topic], tail=False, starting_offset="latest")
    # Partitions 0, 1 resume after offset 0; 2, 3 are new to the flow: read from 0.
    assert run(source, recovery) == [(0, 1), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
