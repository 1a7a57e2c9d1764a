"""A store whose dedup and contract state sits under partition keys resumes exactly once.

The previous release kept ``twg.dedup``'s and windowed ``twg.validate``'s state under
each source partition's key; this release keeps it under the partition's routing key.
``tests/data/previous_release`` is such a store: resumed as it is, under ``python -m
bytewax.run`` at two workers, the steps keep the partition keys (and say so once); after
``thalweg recovery migrate-keys`` they run on routing keys with the state carried over;
a store holding both kinds stops the run. Every resume must keep every order once, drop
the replayed one and reject the reused payment reference (state carried over).
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers import cluster_addresses
from tests.recovery import previous_release_flow as prf
from thalweg_bytewax.cli import main
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig
from thalweg_bytewax.runtime.state_keys import (
    KeyStyle,
    is_routing_key,
    migrate_state_keys,
    stored_key_style,
)

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "previous_release"
FLOW = "previous_release"
ROUTED = (f"{FLOW}.dedup.dedup.stateful_batch", f"{FLOW}.contract.evaluate.stateful_batch")
"""The steps keyed by routing key in this release; the store holds them by partition."""
LEGACY_WARNING = "runs on legacy routing"


@pytest.fixture
def where() -> Iterator[prf.Layout]:
    """The previous release's store at its root with the second part of the inputs."""
    where = prf.layout()
    with prf.root_lock():
        shutil.rmtree(where.root, ignore_errors=True)
        shutil.copytree(FIXTURE / "store", where.root)
        with where.csv.open("a", encoding="utf-8") as csv:
            csv.write((FIXTURE / "part_two.csv").read_text(encoding="utf-8"))
        shutil.copyfile(FIXTURE / "part_two_items.arrow", prf.ipc_file(where, prf.IPC_ROWS[1]))
        yield where


def _keys(where: prf.Layout, step: str) -> set[str]:
    with sqlite3.connect(where.recovery / "part-0.sqlite3") as con:
        rows = con.execute("SELECT state_key FROM snaps WHERE step_id = ?", (step,))
        return {k for (k,) in rows}


def _assert_every_order_once_with_the_state_carried_over(where: prf.Layout) -> None:
    catalog = IcebergCatalogConfig(warehouse=str(where.lake / "warehouse")).load()
    orders = catalog.load_table(f"{prf.NAMESPACE}.orders").scan().to_arrow()
    expected = {f"o{i:04d}" for i in (*prf.PART_ONE, *prf.PART_TWO)} - {f"o{prf.BAD_AMOUNT:04d}"}
    expected.add(prf.LATE_ORDER)
    # The replayed first-run order once (dedup's state), the reusing order not at all
    # (the `unique` window's state): both came from the previous release's store.
    assert Counter(orders.column("order_id").to_pylist()) == Counter(expected)
    revenue = catalog.load_table(f"{prf.NAMESPACE}.revenue").scan().to_arrow()
    total = pa.compute.sum(revenue["revenue"]).as_py()
    clean = sum(10 + 1.25 * i for i in (*prf.PART_ONE, *prf.PART_TWO) if i != prf.BAD_AMOUNT)
    assert total == pytest.approx(clean)


def test_the_previous_release_keeps_dedup_and_contract_state_under_partition_keys(
    where: prf.Layout, tmp_path: Path
) -> None:
    for step in ROUTED:
        assert stored_key_style(where.recovery, step) is KeyStyle.LEGACY
        assert not any(is_routing_key(k) for k in _keys(where, step))
    (tmp_path / "part-0.sqlite3").write_bytes((where.recovery / "part-0.sqlite3").read_bytes())
    with sqlite3.connect(tmp_path / "part-0.sqlite3") as con:
        con.execute("DELETE FROM snaps")
    assert stored_key_style(tmp_path, ROUTED[0]) is KeyStyle.NONE


@pytest.mark.slow
def test_a_resume_at_two_workers_under_bytewax_run_keeps_the_partition_keys(
    where: prf.Layout,
) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bytewax.run",
            "tests.recovery.legacy_keys_flow:flow",
            "-w",
            "2",
            "-r",
            str(where.recovery),
            "-s",
            "0",
            "-b",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    _assert_every_order_once_with_the_state_carried_over(where)
    # Said once a step, naming the step and the way to migrate.
    warnings = [line for line in run.stderr.splitlines() if LEGACY_WARNING in line]
    assert len(warnings) == len(ROUTED), run.stderr[-3000:]
    for step, line in zip(sorted(ROUTED), sorted(warnings), strict=True):
        assert repr(step) in line and "thalweg recovery migrate-keys" in line
    for step in ROUTED:  # it went on writing them where they were
        assert stored_key_style(where.recovery, step) is KeyStyle.LEGACY


def _run_processes(where: prf.Layout, n: int) -> list[tuple[int, str]]:
    """``python -m bytewax.run`` of the flow at ``n`` processes: exit codes and stderr."""
    addresses = cluster_addresses(n)
    base = [sys.executable, "-m", "bytewax.run", "tests.recovery.legacy_keys_flow:flow"]
    recovery = ["-r", str(where.recovery), "-s", "0", "-b", "0"]
    procs = [
        subprocess.Popen(
            [*base, *recovery, "-i", str(i), "-a", addresses],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    out = []
    for proc in procs:
        try:
            err = proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:  # a peer of a failed process may wait for it
            proc.kill()
            err = proc.communicate()[1]
        out.append((proc.returncode, err))
    return out


@pytest.mark.slow
def test_at_two_processes_the_store_stops_the_run_until_migrated_then_resumes_once(
    where: prf.Layout,
) -> None:
    # Each process keys the partitions it reads and need not see the store another
    # holds: they could disagree, so the run stops and names the migration.
    runs = _run_processes(where, 2)
    assert any(code != 0 for code, _ in runs)
    said = "".join(err for _, err in runs)
    assert "thalweg recovery migrate-keys" in said and "2 processes" in said, said[-3000:]
    for step in ROUTED:  # nothing was written under the other keys
        assert stored_key_style(where.recovery, step) is KeyStyle.LEGACY
    migrate_state_keys(where.recovery, ROUTED)
    runs = _run_processes(where, 2)
    assert [code for code, _ in runs] == [0, 0], [err[-2000:] for _, err in runs]
    _assert_every_order_once_with_the_state_carried_over(where)


def test_migrate_keys_moves_the_state_to_routing_keys_and_a_resume_finds_it(
    where: prf.Layout, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    sources = _keys(where, f"{FLOW}.orders_in")
    sys.modules.pop("tests.recovery.legacy_keys_flow", None)
    spec = "tests.recovery.legacy_keys_flow:flow"
    assert main(["recovery", "migrate-keys", spec, str(where.recovery), "--dry-run"]) == 0
    assert stored_key_style(where.recovery, ROUTED[0]) is KeyStyle.LEGACY
    assert main(["recovery", "migrate-keys", spec, str(where.recovery)]) == 0
    out = capsys.readouterr().out
    for step in ROUTED:
        assert f"{step}: " in out and "would move" in out and "moved to routing keys" in out
        assert stored_key_style(where.recovery, step) is KeyStyle.ROUTED
    assert _keys(where, f"{FLOW}.orders_in") == sources  # a source's keys stay
    # Run again: nothing left to move.
    again = migrate_state_keys(where.recovery, ROUTED)
    assert again.rows == dict.fromkeys(sorted(ROUTED), 0)
    with caplog.at_level(logging.WARNING):
        prf.run(where)
    _assert_every_order_once_with_the_state_carried_over(where)
    assert LEGACY_WARNING not in caplog.text
    for step in ROUTED:
        assert stored_key_style(where.recovery, step) is KeyStyle.ROUTED


def test_a_store_holding_both_kinds_of_keys_stops_the_run_naming_the_command(
    where: prf.Layout,
) -> None:
    step = ROUTED[0]
    with sqlite3.connect(where.recovery / "part-0.sqlite3") as con:
        (key,) = _keys(where, step)
        migrate_state_keys(where.recovery, [step])
        routed = con.execute("SELECT state_key FROM snaps WHERE step_id = ?", (step,)).fetchone()
        con.execute(
            "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) "
            "SELECT step_id, ?, snap_epoch, ser_change FROM snaps WHERE step_id = ?",
            (key, step),
        )
    assert is_routing_key(routed[0])
    assert stored_key_style(where.recovery, step) is KeyStyle.MIXED
    with pytest.raises(Exception) as raised:  # noqa: PT011 - Bytewax wraps it; see below
        prf.run(where)
    said = " | ".join(str(e) for e in _chain(raised.value))
    assert "both partition keys and routing keys" in said
    assert "thalweg recovery migrate-keys" in said


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__
