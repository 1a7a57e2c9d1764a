"""A topic removed from a flow with recovery state: named before Bytewax's routing error.

Bytewax 0.21.1 refuses to resume state whose partition is no longer listed with
``Key StateKey(...) is not in this worker's routing map`` — no step, no remedy.
``check_recovery_store`` (and ``thalweg recovery check``) says which step, which
partitions, and what to do, against the same real recovery store.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, run_main

from thalweg_bytewax import cli
from thalweg_bytewax.connectors.kafka import KafkaSource
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.runtime.recovery import (
    OrphanedState,
    check_recovery_store,
    find_orphaned_state,
    stored_state_keys,
)
from thalweg_bytewax.testing import produce


def build(bootstrap: str, topics: list[str], lane: Path, out: list[Any]) -> Dataflow:
    flow = Dataflow("removed_topic")
    raw = op.input("kafka_in", flow, KafkaSource([bootstrap], topics, tail=False))
    op.output("lane", raw, ParquetSink(str(lane)))
    op.output("seen", raw, TestingSink(out))
    return flow


@pytest.fixture
def resumed(kafka_bootstrap: str, make_topic: Any, tmp_path: Path) -> tuple[str, str, Path]:
    """A recovery store written by a flow reading two topics."""
    kept, removed = make_topic(), make_topic()
    for topic in (kept, removed):
        produce(kafka_bootstrap, topic, [{"value": b"x", "partition": p} for p in range(4)])
    recovery = tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)
    flow = build(kafka_bootstrap, [kept, removed], tmp_path / "lane", [])
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(recovery)))
    return kept, removed, recovery


def test_removed_topic_is_named_with_its_step_and_a_remedy(
    kafka_bootstrap: str, resumed: tuple[str, str, Path], tmp_path: Path
) -> None:
    kept, removed, recovery = resumed
    flow = build(kafka_bootstrap, [kept], tmp_path / "lane", [])
    found = find_orphaned_state(flow, recovery)
    assert found == [
        OrphanedState(
            "removed_topic.kafka_in",
            tuple(f"{removed}:{p}" for p in range(4)),
            tuple(f"{kept}:{p}" for p in range(4)),
        )
    ]
    with pytest.raises(ConfigError) as err:
        check_recovery_store(flow, recovery)
    text = str(err.value)
    assert "`removed_topic.kafka_in`" in text
    assert f"`{removed}:0`" in text
    assert "add it back to the source" in text
    assert "python -m bytewax.recovery" in text
    # Without the check, Bytewax itself refuses with the opaque routing error.
    with pytest.raises(RuntimeError, match="routing map"):
        run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(recovery)))


def test_unchanged_flow_passes_and_resumes(
    kafka_bootstrap: str, resumed: tuple[str, str, Path], tmp_path: Path
) -> None:
    kept, removed, recovery = resumed
    out: list[Any] = []
    flow = build(kafka_bootstrap, [kept, removed], tmp_path / "lane", out)
    assert find_orphaned_state(flow, recovery) == []
    check_recovery_store(flow, recovery)
    run_main(flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(str(recovery)))
    assert out == []  # everything was read before: nothing is read twice


def test_store_keys_are_the_newest_live_snapshots(resumed: tuple[str, str, Path]) -> None:
    kept, removed, recovery = resumed
    keys = stored_state_keys(recovery)
    assert keys["removed_topic.kafka_in"] == {f"{t}:{p}" for t in (kept, removed) for p in range(4)}
    # A key whose newest snapshot is a discard (NULL) has no state to route.
    part = next(recovery.glob("part-*.sqlite3"))
    with sqlite3.connect(part) as conn:
        conn.execute(
            "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) "
            "VALUES ('removed_topic.kafka_in', ?, 1000000, NULL)",
            (f"{removed}:0",),
        )
    assert f"{removed}:0" not in stored_state_keys(recovery)["removed_topic.kafka_in"]


def test_not_a_recovery_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="found none"):
        stored_state_keys(tmp_path / "missing")
    (tmp_path / "part-0.sqlite3").write_bytes(b"not sqlite at all, just bytes" * 10)
    with pytest.raises(ConfigError, match="cannot read it as a Bytewax recovery partition"):
        stored_state_keys(tmp_path)


def test_cli_names_the_removed_topic(
    kafka_bootstrap: str,
    resumed: tuple[str, str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kept, removed, recovery = resumed
    module = tmp_path / "flowmod"
    module.mkdir()
    (module / "edited_flow.py").write_text(
        "from pathlib import Path\n"
        "from tests.recovery.test_recovery_check import build\n"
        f"flow = build({kafka_bootstrap!r}, [{kept!r}], Path({str(tmp_path / 'lane')!r}), [])\n"
    )
    monkeypatch.chdir(module)
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2]))
    assert cli.main(["recovery", "check", "edited_flow:flow", str(recovery)]) == 2
    err = capsys.readouterr().err
    assert f"`{removed}:0`" in err and "`removed_topic.kafka_in`" in err
    (module / "whole_flow.py").write_text(
        "from pathlib import Path\n"
        "from tests.recovery.test_recovery_check import build\n"
        f"flow = build({kafka_bootstrap!r}, [{kept!r}, {removed!r}], "
        f"Path({str(tmp_path / 'lane')!r}), [])\n"
    )
    assert cli.main(["recovery", "check", "whole_flow", str(recovery)]) == 0
    assert "every stored partition is listed" in capsys.readouterr().out
