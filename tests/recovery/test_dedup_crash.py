"""Kill the quality lane mid-stream, resume it: dedup state survives, every lane is exactly once.

Runs ``python -m bytewax.run flows.dedup_lane`` through the ``crash`` harness
(tests/fixtures/crash.py) on a recovery store. The source republishes orders at later offsets (producer retries, up to 700
offsets later) and redelivers the tail of each poll. The flow is SIGKILLed mid-stream
(at a fault-injection point inside a sink's epoch snapshot, or from outside), so retries
of orders that were committed before the crash only arrive after the resume: only the
dedup state restored from Bytewax recovery can drop them. A control run resumes the
same crash with dedup state discarded and must let such retries through, which shows
the scenario has teeth.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.fixtures.crash import CrashableFlow, CrashHarness
from tests.fixtures.workers import built_once
from tests.helpers import located
from thalweg_bytewax.contracts import read_audit
from thalweg_bytewax.lanes.dlq import read_dlq

pytestmark = [pytest.mark.slow]

PARTITIONS = 2
PER_PARTITION = 1500
SEED = 11  # the flow's default
RETRY_RATE = 0.2

# Resume with dedup state thrown away: what a dedup that kept its state outside
# Bytewax recovery (or not at all) would do.
_FORGETFUL_RUNNER = """
import runpy, sys
import thalweg_bytewax.dedup.key_memory as key_memory
_init = key_memory.SeenWindow.__init__
key_memory.SeenWindow.__init__ = lambda self, w, state=None, **kw: _init(self, w, None, **kw)
sys.argv = ["bytewax.run", *sys.argv[1:]]
runpy.run_module("bytewax.run", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class Truth:
    """What the lanes must hold: per (partition, offset) of each first publication."""

    unique: frozenset[tuple[int, int]]
    bad: dict[tuple[int, int], str]  # -> expected DLQ reason
    order_id: dict[tuple[int, int], str]
    retries: dict[tuple[int, int], int]  # (partition, retry offset) -> origin offset


@cache
def truth() -> Truth:
    """Worked out once, when a test first needs it (not at collection)."""
    from flows.dedup_lane import origins, planned_order

    unique, bad, order_id, retries = set(), {}, {}, {}
    for p in range(PARTITIONS):
        plan = origins(SEED, p, PER_PARTITION, RETRY_RATE)
        for offset, origin in enumerate(plan):
            if offset != origin:
                retries[(p, offset)] = origin
                continue
            order = planned_order(SEED, p, origin)
            unique.add((p, offset))
            order_id[(p, offset)] = order["order_id"]
            if order["status"] == "LOST":
                bad[(p, offset)] = "dq"
            elif order["total"] is None:
                bad[(p, offset)] = "contract"
    return Truth(frozenset(unique), bad, order_id, retries)


def flow_vars(lake: Path, **extra: str) -> dict[str, str]:
    """The quality-lane flow's variables: its lanes under ``lake``, throttled to fall mid-stream."""
    return {
        "THALWEG_DATA_DIR": str(lake),
        "THALWEG_SAMPLE_PARTITIONS": str(PARTITIONS),
        "THALWEG_SAMPLE_PER_PARTITION": str(PER_PARTITION),
        "THALWEG_RETRY_RATE": str(RETRY_RATE),
        "THALWEG_BATCH_SIZE": "100",
        "THALWEG_MAX_RECORDS_PER_S": "400",
        "THALWEG_SHARDS": "2",
        **extra,
    }


def dedup_lane(
    crash: CrashHarness, lake: Path, recovery: Path, *, forgetful: bool = False, **extra: str
) -> CrashableFlow:
    """``flows.dedup_lane`` on ``recovery``, a snapshot every second; ``forgetful`` runs it
    with dedup state thrown away on resume (``_FORGETFUL_RUNNER``)."""
    env = flow_vars(lake, **extra)
    flow = crash.flow("flows.dedup_lane", env=env, snapshot_s=1, recovery=recovery)
    if not forgetful:
        return flow
    # The same arguments to `bytewax.run`, through the runner that forgets.
    _, _, _, *args = flow.argv  # python -m bytewax.run ...
    return crash.command([sys.executable, "-c", _FORGETFUL_RUNNER, *args], env=env)


def lane_rows(path: Path, *columns: str) -> list[tuple]:
    if not path.exists() or not any(path.rglob("*.parquet")):
        return []
    names = ["_twg_source_partition", "_twg_source_offset", *columns]
    table = ds.dataset(path, format="parquet").to_table(columns=names)
    return list(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def finalized_before(lake: Path) -> dict[int, int]:
    """Per partition, the last offset of the clean lane that was durable at the crash."""
    last: dict[int, int] = {}
    for p, o in lane_rows(lake / "orders"):
        last[p] = max(last.get(p, -1), o)
    return last


def late_retries_of_committed_orders(lake: Path) -> list[tuple[int, int, int]]:
    """Retries that arrive after the resume of an order already in the lake at the crash."""
    committed = {(p, o) for p, o in lane_rows(lake / "orders")}
    last = finalized_before(lake)
    return [
        (p, offset, origin)
        for (p, offset), origin in truth().retries.items()
        if offset > last.get(p, -1) and (p, origin) in committed
    ]


def assert_every_lane_exactly_once(lake: Path) -> None:
    clean = lane_rows(lake / "orders", "order_id")
    keys = Counter(order_id for _, _, order_id in clean)
    dupes = {k: n for k, n in keys.items() if n > 1}
    assert not dupes, f"{len(dupes)} natural keys more than once in the clean lane"
    clean_at = {(p, o): k for p, o, k in clean}
    assert len(clean_at) == len(clean)
    good = truth().unique - truth().bad.keys()
    assert set(clean_at) == good, (
        f"missing {sorted(good - set(clean_at))[:5]}, unexpected {sorted(set(clean_at) - good)[:5]}"
    )
    assert all(truth().order_id[loc] == k for loc, k in clean_at.items())

    dlq = read_dlq(lake / "dlq")
    at = located(dlq)
    assert len(at) == len(set(at)), "a record is in the DLQ twice"
    assert dict(zip(at, dlq.column("reason").to_pylist(), strict=True)) == truth().bad
    assert not set(at) & set(clean_at)

    audit = read_audit(lake / "audit")
    audited = located(audit)
    assert len(audited) == len(set(audited)), "a record has two audit rows"
    assert set(audited) == truth().unique
    failed = {
        loc
        for loc, verdict in zip(audited, audit.column("verdict").to_pylist(), strict=True)
        if verdict == "fail"
    }
    assert failed == set(truth().bad)
    registry = list((lake / "rules").glob("*.parquet"))
    assert [p.stem for p in registry] == audit.column("ruleset_version").unique().to_pylist()


def crash_early(base: Path) -> None:
    """Run the flow into ``base/lake`` and kill it in its 4th sink snapshot."""
    crash = CrashHarness(base)
    lake = base / "lake"
    dedup_lane(crash, lake, crash.init_recovery()).killed_at("parquet.before_finalize:4")
    before = len(lane_rows(lake / "orders"))
    assert 0 < before < len(truth().unique) // 2, "the crash should fall early mid-stream"
    late = late_retries_of_committed_orders(lake)
    assert len(late) >= 20, "retries of committed orders must arrive after the resume"


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One run killed inside the 4th sink snapshot, before half the orders landed (once per
    test run, also on pytest-xdist workers: each test resumes a copy of it)."""
    base = built_once(tmp_path_factory, "dedup-crashed", crash_early)
    return base / "lake", base / "recovery"


def copy_of(crashed: tuple[Path, Path], dest: Path) -> tuple[Path, Path]:
    lake, recovery = crashed
    shutil.copytree(lake, dest / "lake")
    shutil.copytree(recovery, dest / "recovery")
    return dest / "lake", dest / "recovery"


def test_resume_after_sigkill_passes_no_duplicate_and_loses_nothing(
    crashed: tuple[Path, Path], crash: CrashHarness
) -> None:
    lake, recovery = copy_of(crashed, crash.root)
    dedup_lane(crash, lake, recovery).finishes()
    assert_every_lane_exactly_once(lake)
    assert not list(lake.rglob(".staging-*"))


def test_control_resume_without_dedup_state_lets_late_retries_through(
    crashed: tuple[Path, Path], crash: CrashHarness
) -> None:
    lake, recovery = copy_of(crashed, crash.root)
    late = late_retries_of_committed_orders(lake)
    # Without redelivery on this resume: a redelivered retry below the offsets a sink had
    # committed, dropped by dedup before the crash, would pass the forgotten dedup and
    # reach the sink, which refuses rows below its resumed offsets that its target does
    # not hold (the run would stop there, before any late retry lands).
    dedup_lane(crash, lake, recovery, forgetful=True, THALWEG_REDELIVER="0").finishes()
    clean = lane_rows(lake / "orders", "order_id")
    keys = Counter(order_id for _, _, order_id in clean)
    passed = {(p, o) for p, o, _ in clean} & {(p, o) for p, o, _ in late}
    assert passed, "with dedup state lost, retries of committed orders reach the lane"
    assert any(n > 1 for n in keys.values())
    with pytest.raises(AssertionError, match="natural keys more than once"):
        assert_every_lane_exactly_once(lake)


def finalized_files(lake: Path) -> int:
    return sum(1 for f in (lake / "orders").rglob("*.parquet") if not f.name.startswith("."))


def more_files(lake: Path, than: int) -> bool:
    """Whether the lake holds more finalized files than ``than``: an epoch of its own."""
    return finalized_files(lake) > than


def test_external_sigkill_at_arbitrary_moments_then_resume(crash: CrashHarness) -> None:
    lake = crash.root / "lake"
    flow = dedup_lane(crash, lake, crash.recovery)
    for linger in (0.7, 0.3):
        # Kill once the run has made progress of its own, whatever the machine's speed.
        files = finalized_files(lake) if lake.exists() else 0
        proc = flow.start()
        crash.wait_until(
            partial(more_files, lake, files), proc, timeout_s=60, what="an epoch finalized"
        )
        time.sleep(linger)
        crash.kill(proc)
        assert proc.returncode == -signal.SIGKILL, "the run finished before the kill"
    assert 0 < len(lane_rows(lake / "orders")) < len(truth().unique), "kills should fall mid-stream"
    flow.finishes()
    assert_every_lane_exactly_once(lake)
