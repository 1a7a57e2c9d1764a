"""The kill-and-resume harness itself (tests/fixtures/crash.py), on tiny Python commands.

A pod killed from outside ends with every process of its group, and so does one a test
leaves behind; the environment of a pod and of a user's command holds none of the test's
``THALWEG_*`` variables; a run that hangs, or ends before what a test waits for, fails
the test with the tail of its standard error; the armed process of a cluster is waited
for and its peers ended.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.fixtures.crash import ROOT, CrashHarness, logged, tail

PY = sys.executable

SPAWN = """
import subprocess, sys, time
from pathlib import Path
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
Path(sys.argv[1]).write_text(str(child.pid))
time.sleep(600)
"""
"""A pod's entry point: starts a child (its flow process), writes the child's pid, waits."""


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_pod_killed_from_outside_ends_with_its_flow_process(crash: CrashHarness) -> None:
    mark = crash.root / "child.pid"
    proc = crash.pod(0, [PY, "-c", SPAWN, str(mark)], "127.0.0.1:1").start()
    crash.wait_until(mark.exists, proc, what="the child's start")
    child = int(mark.read_text())
    assert alive(child)
    crash.kill(proc)
    crash.wait_until(lambda: not alive(child), timeout_s=10, what="the child's end")
    assert proc.returncode == -9


def test_a_pod_left_running_is_killed_with_its_group_when_the_test_ends(
    crash: CrashHarness,
) -> None:
    mark = crash.root / "child.pid"
    proc = crash.pod(0, [PY, "-c", SPAWN, str(mark)], "127.0.0.1:1").start()
    crash.wait_until(mark.exists, proc, what="the child's start")
    crash.stop()  # what the fixture does at the test's end
    crash.wait_until(lambda: not alive(int(mark.read_text())), timeout_s=10, what="the end")
    assert proc.returncode == -9


def test_a_pod_and_a_clean_command_see_only_their_own_settings(
    crash: CrashHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THALWEG_TOPICS", "the-tests-own")
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    pod = crash.pod(1, [PY, "-c", dump], "a:1;b:1", {"MINE": "x"})
    env = json.loads(pod.finishes().stdout)
    assert env["THALWEG_PROCESS_ID"] == "1"
    assert env["THALWEG_CLUSTER_ADDRESSES"] == "a:1;b:1"
    assert env["THALWEG_RECOVERY_DIR"] == str(crash.root / "pod-1" / "recovery")
    assert env["PYTHONPATH"] == str(ROOT) and env["MINE"] == "x"
    assert "THALWEG_TOPICS" not in env
    assert pod.cwd == crash.root / "pod-1"

    user = json.loads(crash.command([PY, "-c", dump], clean=True).finishes().stdout)
    assert not any(k.startswith("THALWEG_") for k in user)
    assert str(ROOT) not in user.get("PYTHONPATH", "").split(os.pathsep)
    ours = json.loads(crash.command([PY, "-c", dump]).finishes().stdout)
    assert ours["THALWEG_TOPICS"] == "the-tests-own"
    assert ours["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def test_a_hung_run_fails_the_test_with_its_stderr(crash: CrashHarness) -> None:
    hang = "import sys, time; print('stuck at epoch 3', file=sys.stderr, flush=True)"
    hang += "; time.sleep(600)"
    flow = crash.command([PY, "-c", hang], timeout_s=3)
    with pytest.raises(pytest.fail.Exception, match=r"still ran after 3 s: stuck at epoch 3"):
        flow.run()


def test_a_run_ending_before_the_awaited_moment_fails_with_its_stderr(
    crash: CrashHarness,
) -> None:
    proc = crash.command([PY, "-c", "raise SystemExit('no broker at x:1')"]).start()
    with pytest.raises(pytest.fail.Exception, match=r"ended \(1\) before a row.*no broker at x:1"):
        crash.wait_until(lambda: False, proc, what="a row")


def test_the_armed_process_of_a_cluster_is_awaited_and_its_peers_ended(
    crash: CrashHarness,
) -> None:
    peer = crash.command([PY, "-c", "import time; time.sleep(600)"]).start()
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    armed = crash.command([PY, "-c", suicide]).start()
    crash.killed(armed, peer, grace_s=1)
    assert peer.returncode == -9
    survivor = crash.command([PY, "-c", "print('done')"]).start()
    with pytest.raises(AssertionError, match=r"\(0, "):
        crash.killed(survivor, grace_s=1)  # it was not killed: the fault did not fire


def test_a_kill_waits_for_a_marker_in_the_runs_log(crash: CrashHarness) -> None:
    log = crash.root / "run.stderr"
    steps = "import sys, time\nfor i in range(600):\n"
    steps += "    print(f'epoch {i} committed', file=sys.stderr, flush=True); time.sleep(0.05)"
    proc = crash.command([PY, "-c", steps]).start(stderr=log)
    crash.wait_until(logged(log, "epoch 5 committed"), proc, what="the fifth epoch")
    crash.kill(proc)
    assert proc.returncode == -9
    assert "epoch 5 committed" in log.read_text()
    assert "epoch 599 committed" not in log.read_text()


def test_tail_keeps_the_end_of_long_output() -> None:
    assert tail("x" * 5000 + "the error").endswith("the error")
    assert len(tail("x" * 5000)) == 3000
    assert tail(None) == "" and tail(b"bytes\xff") == "bytes\ufffd"
