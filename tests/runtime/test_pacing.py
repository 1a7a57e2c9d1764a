"""A source partition that emitted records asks to be woken a moment later, never "now".

Bytewax 0.21.1 holds a partition back at an epoch boundary until every output of the
cluster has finished the previous epoch, and re-activates its input operator at the
partition's ``next_awake`` meanwhile: ``None`` is due at once, so the worker never parks
and spins a core until the slowest process commits (docs/scaling.md). Every thalweg
source returns :func:`thalweg_bytewax.runtime.pacing.after_batch` instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from bytewax.recovery import init_db_dir

from tests.helpers import raw_batch, run_into
from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink, ArrowIPCSource
from thalweg_bytewax.connectors.files import FileSource
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.connectors.raw_lane import RawLaneSource
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.dev._orders_sample import SampleOrdersSource
from thalweg_bytewax.runtime.pacing import AFTER_BATCH
from thalweg_bytewax.testing import produce

Build = Callable[[Path], Any]


def _kafka(bootstrap: str, topic: str) -> Build:
    def build(_: Path) -> Any:
        produce(bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(5)])
        return KafkaSource([bootstrap], [topic]).build_part("in", f"{topic}:0", None)

    return build


def _files(tmp_path: Path) -> Any:
    path = tmp_path / "o.csv"
    path.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(20)))
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    source = FileSource(str(path), schema=schema, batch_rows=8)
    [key] = source.list_parts()
    return source.build_part("s", key, None)


def _raw_lane(tmp_path: Path) -> Any:
    lane, recovery = tmp_path / "raw", tmp_path / "rec"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    run_into([("t:0", raw_batch("t", 0, range(10)))], ParquetSink(lane), recovery=recovery)
    source = RawLaneSource(lane, {("t", 0): OffsetCoverage([(0, 9)])}, batch_size=4)
    return source.build_part("s.in", "t:0", None)


def _arrow_ipc(tmp_path: Path) -> Any:
    run_into([("t:0", raw_batch("t", 0, range(5)))], ArrowIPCSink(tmp_path / "ipc"))
    source = ArrowIPCSource(tmp_path / "ipc")
    (key,) = source.list_parts()
    return source.build_part("s.in", key, None)


def _sample(_: Path) -> Any:
    return SampleOrdersSource(40, batch_size=4).build_part("in", "orders:0", None)


@pytest.fixture(params=["kafka", "files", "raw_lane", "arrow_ipc", "sample"])
def partition(
    request: pytest.FixtureRequest, tmp_path: Path, kafka_bootstrap: str, make_topic: Any
) -> Iterator[Any]:
    builds: dict[str, Build] = {
        "kafka": _kafka(kafka_bootstrap, make_topic()),
        "files": _files,
        "raw_lane": _raw_lane,
        "arrow_ipc": _arrow_ipc,
        "sample": _sample,
    }
    part = builds[request.param](tmp_path)
    yield part
    part.close()


def test_a_partition_that_emitted_records_asks_to_be_woken_a_moment_later(partition: Any) -> None:
    deadline = time.monotonic() + 20
    while True:  # a Kafka partition's first polls may come before its first fetch
        before = datetime.now(UTC)
        batches = partition.next_batch()
        awake = partition.next_awake()  # Bytewax asks right after each batch
        after = datetime.now(UTC)
        if any(batch.num_rows for _, batch in batches) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert any(batch.num_rows for _, batch in batches), "no records were read"
    # None would be due at once: held back by the epoch, the worker would never park.
    assert awake is not None
    assert before < awake <= after + AFTER_BATCH
