"""Kill a flow with an unnest SQL node and its own sink, resume it: every derived row once.

The flow (``tests/recovery/sql_unnest_flow.py``) writes the raw lane and, through
``twg.sql`` with an ``unnest``, a lane of order items (0 to 3 per order). It is SIGKILLed
inside a sink's epoch commit, before or after the commit, then resumed. The items lane
must then equal a batch recomputation of the same query over the whole raw lane: every
derived row exactly once, keyed by (partition, offset, derived ordinal), none lost.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.fixtures.crash import CrashHarness
from tests.recovery.sql_unnest_flow import QUERY
from thalweg_bytewax.lanes import read_lane
from thalweg_bytewax.testing import produce

pytestmark = pytest.mark.slow

PARTITIONS = 2
PER_PARTITION = 1200
ROW = tuple[int, int, int, str, str]


def fill(bootstrap: str, topic: str) -> None:
    produce(
        bootstrap,
        topic,
        [
            {
                "key": f"k{i}".encode(),
                "value": json.dumps(
                    {"id": f"o-{p}-{i}", "items": [f"sku-{i}-{j}" for j in range(i % 4)]}
                ).encode(),
                "partition": p,
            }
            for i in range(PER_PARTITION)
            for p in range(PARTITIONS)
        ],
    )


def flow_env(bootstrap: str, topic: str, base: Path) -> dict[str, str]:
    return {
        "THALWEG_BOOTSTRAP_SERVERS": bootstrap,
        "THALWEG_TOPICS": topic,
        "THALWEG_RAW_LANE": str(base / "raw"),
        "THALWEG_ITEMS_LANE": str(base / "items"),
        "THALWEG_BATCH_SIZE": "100",
        "THALWEG_MAX_RECORDS_PER_S": "600",
    }


def items_rows(base: Path) -> list[ROW]:
    names = ["_twg_source_partition", "_twg_source_offset", "_twg_derived_ordinal"]
    table = read_lane(base / "items", [*names, "order_id", "item"])
    cols = [table.column(n).to_pylist() for n in [*names, "order_id", "item"]]
    return list(zip(*cols, strict=True))


def recomputed(base: Path) -> list[ROW]:
    """The same query over the whole raw lane at once, numbering items per record."""
    raw = read_lane(base / "raw")  # noqa: F841 - read by DuckDB below
    con = duckdb.connect()
    sql = (
        "SELECT _twg_source_partition, _twg_source_offset, "
        "CAST(row_number() OVER (PARTITION BY _twg_source_partition, _twg_source_offset "
        "ORDER BY item_index) - 1 AS INTEGER), order_id, item FROM ("
        "SELECT _twg_source_partition, _twg_source_offset, "
        "json_extract_string(decode(_twg_source_value), '$.id') AS order_id, "
        "unnest(json_extract_string(decode(_twg_source_value), '$.items[*]')) AS item, "
        "unnest(generate_series(1, len(json_extract_string(decode(_twg_source_value), "
        "'$.items[*]')))) AS item_index FROM raw)"
    )
    return [tuple(r) for r in con.sql(sql).fetchall()]


@pytest.mark.parametrize("fault", ["epoch_sink.before_commit:3", "epoch_sink.after_commit:3"])
def test_kill_and_resume_lands_every_derived_row_exactly_once(
    kafka_bootstrap: str, make_topic: Any, crash: CrashHarness, tmp_path: Path, fault: str
) -> None:
    assert "unnest" in QUERY
    topic = make_topic()
    fill(kafka_bootstrap, topic)
    env = flow_env(kafka_bootstrap, topic, tmp_path)
    flow = crash.flow("tests.recovery.sql_unnest_flow", snapshot_s=1, env=env)
    flow.killed_at(fault)
    before = len(items_rows(tmp_path)) if any((tmp_path / "items").rglob("*.parquet")) else 0
    flow.finishes()

    got = items_rows(tmp_path)
    want = recomputed(tmp_path)
    assert len(want) == PARTITIONS * sum(i % 4 for i in range(PER_PARTITION))
    dupes = [r for r, n in Counter(got).items() if n > 1]
    assert not dupes, f"{len(dupes)} derived rows landed twice, e.g. {dupes[:3]}"
    keys = Counter((p, o, k) for p, o, k, _, _ in got)
    assert max(keys.values()) == 1, "(partition, offset, ordinal) is not unique"
    assert sorted(got) == sorted(want)
    assert 0 < before < len(want), "the crash should fall mid-stream"
