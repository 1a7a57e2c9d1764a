"""Values per OS thread survive a Bytewax cluster worker's fresh thread state per batch.

A worker that Bytewax's Rust runtime starts (``cluster_main``, ``-i/-a``) runs each
activation of a Python step with a Python thread state of its own: ``threading.local``
is empty again at every batch there, while ``ThreadSlots`` finds the thread's value.
"""

from __future__ import annotations

import os
import threading

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource

from tests.fixtures.flows import ENTRY_POINTS
from thalweg_bytewax.system.thread_slots import ThreadSlots

BATCHES = 40


def _run_counting(entry_point: str) -> tuple[int, int, int]:
    """Run BATCHES one-item batches; (fresh thread locals, distinct slot values, idents)."""
    local = threading.local()
    slots: ThreadSlots[object] = ThreadSlots(object)
    fresh: list[bool] = []
    values: set[int] = set()
    idents: set[int] = set()

    def touch(x: int) -> int:
        fresh.append(not hasattr(local, "seen"))
        local.seen = True
        values.add(id(slots.get()))
        idents.add(threading.get_ident())
        return x

    flow = Dataflow("slots")
    up = op.input("in", flow, TestingSource(list(range(BATCHES)), batch_size=1))
    op.output("out", op.map("touch", up, touch), TestingSink([]))
    ENTRY_POINTS[entry_point](flow)
    return sum(fresh), len(values), len(idents)


def test_a_cluster_worker_finds_its_slot_at_every_batch() -> None:
    fresh, values, idents = _run_counting("cluster_main-1x1")
    assert idents == 1  # one OS thread ran every batch...
    assert fresh > BATCHES // 2  # ...with threading.local emptied between batches
    assert values == 1  # the slot is found each time


def test_on_the_single_threaded_runner_both_keep_their_value() -> None:
    fresh, values, idents = _run_counting("run_main")
    assert (fresh, values, idents) == (1, 1, 1)


def test_each_thread_has_its_own_value_and_values_lists_them_all() -> None:
    slots: ThreadSlots[list[int]] = ThreadSlots(list)
    barrier = threading.Barrier(4)

    def work(n: int) -> None:
        barrier.wait()  # all four alive at once: four distinct identities
        for _ in range(n):
            slots.get().append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(len, slots.values())) == [1, 2, 3, 4]
    assert sorted(v[0] for v in slots.values()) == [1, 2, 3, 4]
    assert len(slots) == 4


@pytest.mark.slow  # forks a process
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_without_the_parents_values() -> None:
    slots: ThreadSlots[list[str]] = ThreadSlots(list)
    slots.get().append("parent")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it finds, then leave at once
        os.close(read)
        found = f"{len(slots)}:{slots.get()!r}:{len(slots)}"
        os.write(write, found.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = pipe.read()
    os.waitpid(pid, 0)
    assert found == "0:[]:1"
    assert slots.get() == ["parent"]  # the parent's own is untouched


def test_put_replaces_only_the_calling_threads_value() -> None:
    slots: ThreadSlots[str] = ThreadSlots(lambda: "made")
    other: list[str] = []
    worker = threading.Thread(target=lambda: other.append(slots.get()))
    worker.start()
    worker.join()
    slots.put("mine")
    assert slots.get() == "mine"
    assert sorted(slots.values()) == ["made", "mine"]
    assert other == ["made"]
