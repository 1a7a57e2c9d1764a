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

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cluster_addresses
from thalweg_bytewax.cluster.recovery_init import partition_files

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
THALWEG = Path(sys.executable).with_name("thalweg")
PARTITIONS = 3


def start(pod: Path, address: str, fault: str | None) -> subprocess.CompletedProcess[str]:
    """A cluster of one process: ``thalweg cluster`` with recovery, as a pod runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "THALWEG_PROCESS_ID": "0",
            "THALWEG_CLUSTER_ADDRESSES": address,
            "THALWEG_RECOVERY_DIR": str(pod / "recovery"),
            "THALWEG_RECOVERY_PARTITIONS": str(PARTITIONS),
            "TINY_FLOW_OUT": str(pod / "out.txt"),
        }
    )
    if fault is not None:
        env["THALWEG_FAULT"] = fault
    argv = [str(THALWEG), "cluster", "-s", "1", "-b", "0", "tests.cluster.tiny_flow:flow"]
    return subprocess.run(
        argv, cwd=pod, env=env, capture_output=True, text=True, timeout=120, check=False
    )


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
    tmp_path: Path, fault: str, moved: int
) -> None:
    address = cluster_addresses(1)
    pod = tmp_path / "pod-0"
    pod.mkdir()
    store = pod / "recovery"

    killed = start(pod, address, fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    in_place = {p.name: p.stat().st_ino for p in partition_files(store)}
    assert len(in_place) == moved
    assert not (pod / "out.txt").exists(), "the flow must not start before the store"

    again = start(pod, address, None)
    assert again.returncode == 0, again.stderr[-3000:]
    parts = partition_files(store)
    assert [p.name for p in parts] == [f"part-{i}.sqlite3" for i in range(PARTITIONS)]
    # The partitions already in place are the same files: none was made again over them.
    assert {n: i for n, i in ((p.name, p.stat().st_ino) for p in parts) if n in in_place} == (
        in_place
    )
    assert sorted(p.name for p in store.iterdir()) == [p.name for p in parts]
    assert (pod / "out.txt").read_text().split() == ["0", "1", "2"]

    # And a third start resumes from that store: the same files, the flow's input done.
    third = start(pod, address, None)
    assert third.returncode == 0, third.stderr[-3000:]
    assert {p.name: p.stat().st_ino for p in partition_files(store)} == {
        p.name: p.stat().st_ino for p in parts
    }
    assert (pod / "out.txt").read_text().split() == ["0", "1", "2"]
