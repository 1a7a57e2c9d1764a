"""The contracts extension lets other threads run while it hashes keys and writes row JSON.

Another worker of the same process (``-w 2``) needs the GIL while one worker validates.
With a switch interval longer than the calls, a thread waiting for the GIL runs only
while the holder releases it: a counter it bumps moves during a call that releases the
GIL and stays still during one that holds it (checked first, on a call known to hold it).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pytest

from thalweg_bytewax.contracts import kernels, row_json

ROWS = 2_000_000


@contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """Let a thread waiting for the GIL ask the holder for it only after ``seconds``."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.fixture
def long_switch_interval() -> Iterator[None]:
    # Long beside a call on an idle core; a call that releases the GIL lets the waiting
    # thread run at once, and waits this long at most for it back.
    with switch_interval(0.5):
        yield


def runs_beside(call: Callable[[], object]) -> int:
    """How often another thread got to run while ``call`` ran in this one."""
    count = [0]
    go = threading.Event()
    stop = threading.Event()

    def spin() -> None:
        go.wait()
        while not stop.is_set():
            count[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()  # it waits for `go` without the GIL
    go.set()  # now it waits for the GIL, up to the switch interval
    before = count[0]
    call()
    during = count[0] - before
    stop.set()
    spinner.join()
    return during


def test_a_call_that_holds_the_gil_lets_no_other_thread_run() -> None:
    # Longer than the call can take on a loaded machine: a holder is asked for the GIL
    # only after the interval, whatever the wall time of its call, so nothing runs
    # beside it. (The calls that release it do not wait for an interval at all.)
    with switch_interval(60):
        assert runs_beside(lambda: sum(range(ROWS))) == 0


def test_the_native_key_hash_releases_the_gil(long_switch_interval: None) -> None:
    keys = pa.array(np.arange(ROWS, dtype=np.int64) % 1000)
    assert runs_beside(lambda: kernels.duplicate_mask(pa.record_batch({"k": keys}), ["k"])) > 0


def test_the_native_row_json_writer_releases_the_gil(long_switch_interval: None) -> None:
    n = ROWS // 4
    batch = pa.record_batch(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "name": pa.array(["order-" + str(i % 97) for i in range(n)]),
            "amount": pa.array(np.linspace(0, 1, n)),
        }
    )
    assert runs_beside(lambda: row_json.rows_as_json(batch)) > 0
