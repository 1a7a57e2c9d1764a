"""``thalweg cluster`` SIGKILLed around the moves of a new recovery store into place.

Process 0 makes the partitions in a staging directory, then renames them into the
recovery directory one by one (``cluster.recovery_init.before_rename`` /
``after_rename`` are the fault points). Killed before the first rename, between two, or
after the last, the next start with the same command must run the flow on the whole set:
never on a part of it (Bytewax refuses a store with missing partitions, and a start that
took a part for a store would refuse it at every restart), never on none, and never on a
new set made over partitions already in place.
"""

from __future__ import annotations

import pytest

from tests.fixtures.crash import THALWEG, CrashableFlow, CrashHarness
from tests.helpers import cluster_addresses
from thalweg_bytewax.cluster.recovery_init import partition_files

pytestmark = pytest.mark.slow

PARTITIONS = 3


def pod(crash: CrashHarness) -> CrashableFlow:
    """A cluster of one process: ``thalweg cluster`` with recovery, as a pod runs it."""
    argv = [str(THALWEG), "cluster", "-s", "1", "-b", "0", "tests.cluster.tiny_flow:flow"]
    env = {
        "THALWEG_RECOVERY_PARTITIONS": str(PARTITIONS),
        "TINY_FLOW_OUT": str(crash.root / "pod-0" / "out.txt"),
    }
    return crash.pod(0, argv, cluster_addresses(1), env)


@pytest.mark.parametrize(
    ("fault", "moved"),
    [
        ("cluster.recovery_init.before_rename:1", 0),
        ("cluster.recovery_init.before_rename:2", 1),
        ("cluster.recovery_init.after_rename:1", 1),
        (f"cluster.recovery_init.after_rename:{PARTITIONS}", PARTITIONS),
    ],
)
def test_a_start_killed_around_a_rename_is_finished_by_the_next_one(
    crash: CrashHarness, fault: str, moved: int
) -> None:
    start = pod(crash)
    store = start.cwd / "recovery"

    start.killed_at(fault)
    in_place = {p.name: p.stat().st_ino for p in partition_files(store)}
    assert len(in_place) == moved
    assert not (start.cwd / "out.txt").exists(), "the flow must not start before the store"

    start.finishes()
    parts = partition_files(store)
    assert [p.name for p in parts] == [f"part-{i}.sqlite3" for i in range(PARTITIONS)]
    # The partitions already in place are the same files: none was made again over them.
    assert {n: i for n, i in ((p.name, p.stat().st_ino) for p in parts) if n in in_place} == (
        in_place
    )
    assert sorted(p.name for p in store.iterdir()) == [p.name for p in parts]
    assert (start.cwd / "out.txt").read_text().split() == ["0", "1", "2"]

    # And a third start resumes from that store: the same files, the flow's input done.
    start.finishes()
    assert {p.name: p.stat().st_ino for p in partition_files(store)} == {
        p.name: p.stat().st_ino for p in parts
    }
    assert (start.cwd / "out.txt").read_text().split() == ["0", "1", "2"]
