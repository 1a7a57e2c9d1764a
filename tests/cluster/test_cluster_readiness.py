"""``/ready`` of a cluster's pods, over HTTP: false until the cluster formed, and after.

Two "pods" (each its own loopback address, the same peer and HTTP ports on both, as in
a StatefulSet) run ``thalweg cluster`` on a flow that turns observability on as it is
built, so each pod's server answers from the flow's import on. Pod 1 starts alone: it
answers not ready, naming the peer it waits for, and stays so. Pod 0 starts: both turn
ready. Pod 0 is SIGKILLed while pod 1's worker is in a slow step: pod 1 answers not
ready, naming the lost peer, until its process ends (non-zero, to be restarted).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fixtures.crash import THALWEG, CrashableFlow, CrashHarness
from tests.helpers import pod_hosts

pytestmark = pytest.mark.slow


def get(url: str) -> tuple[int, dict[str, Any]] | None:
    """An endpoint's status and JSON body; None while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - a test's own URL
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return int(err.code), json.loads(err.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def pod(
    crash: CrashHarness, process_id: int, host: str, addresses: str, http_port: int
) -> CrashableFlow:
    """A pod without recovery serving on ``host:http_port``, its worker's steps 3 s long."""
    env = {
        "THALWEG_HTTP_HOST": host,
        "THALWEG_HTTP_PORT": str(http_port),
        "ENDLESS_STEP_S": "3",
        "ENDLESS_MARK": str(crash.root / f"pod-{process_id}" / "work-started"),
    }
    argv = [str(THALWEG), "cluster", "tests.cluster.endless_flow:flow"]
    return crash.pod(process_id, argv, addresses, env, recovery=False)


def wait_for(
    url: str, proc: subprocess.Popen[str], status: int | None = None
) -> tuple[int, dict[str, Any]]:
    """Poll ``url`` until it answers (with ``status`` if given), while ``proc`` runs."""
    deadline = time.monotonic() + 180
    while True:
        reply = get(url)
        if reply is not None and status in (None, reply[0]):
            return reply
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"{url} answered {reply}"
        time.sleep(0.2)


def test_a_pod_is_ready_only_while_its_cluster_is_formed(crash: CrashHarness) -> None:
    hosts, (peer_port, http_port) = pod_hosts(2, ports=2)
    addresses = ";".join(f"{h}:{peer_port}" for h in hosts)
    ready = [f"http://{h}:{http_port}/ready" for h in hosts]
    procs = [pod(crash, 1, hosts[1], addresses, http_port).start()]
    # Alone, pod 1 serves, is alive, and is not ready: its peer has not connected.
    status, body = wait_for(ready[1], procs[0])
    assert status == 503, body
    assert body["reasons"][0].startswith("cluster `formation`: forming"), body
    assert get(f"http://{hosts[1]}:{http_port}/live") == (200, {"live": True, "reason": ""})
    time.sleep(3)  # nothing changes while the peer is away, but the peer is named
    reply = get(ready[1])
    assert reply is not None and reply[0] == 503, reply
    assert reply[1]["reasons"] == [
        f"cluster `formation`: forming: process 1 of 2 waits for its peer(s) "
        f"{hosts[0]}:{peer_port} to connect"
    ]

    procs.insert(0, pod(crash, 0, hosts[0], addresses, http_port).start())
    for url in ready:
        wait_for(url, procs[0], 200)
        wait_for(url, procs[1], 200)
    health = get(f"http://{hosts[1]}:{http_port}/health")
    assert health is not None
    assert health[1]["components"]["cluster"]["formation"]["status"] == "ok"

    # Pod 0 dies as pod 1's worker starts a 3 s step, so pod 1's process ends only
    # after it: its server answers meanwhile.
    mark = crash.root / "pod-1" / "work-started"
    # Ready can come before the first number's step: wait for a step to start after it.
    crash.wait_until(mark.exists, procs[1], what="pod 1's first step", poll_s=0.02)
    seen = mark.read_text()
    crash.wait_until(
        lambda: mark.read_text() != seen, procs[1], what="pod 1's next step", poll_s=0.02
    )
    crash.kill(procs[0])
    replies = []
    while procs[1].poll() is None:
        reply = get(ready[1])
        if reply is not None:
            replies.append(reply)
        time.sleep(0.05)
    lost = [body for status, body in replies if status == 503]
    assert lost, f"pod 1 answered {replies[-3:]} until it ended"
    assert all(status == 503 for status, _ in replies[len(replies) - len(lost) :])
    assert f"lost the connection to peer(s) {hosts[0]}:{peer_port}" in lost[-1]["reasons"][0]
    assert procs[1].returncode not in (0, None)
