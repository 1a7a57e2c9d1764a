"""observe() leaves the garbage collector alone unless asked to freeze (once per process).

Each case runs in a fresh interpreter: the garbage collector's permanent generation is
process-wide, and a test process has long since called ``observe()``. The counts are
compared with the interpreter's own at the start, which is not zero on every Python
(3.12 freezes objects of its own before any user code runs).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


@pytest.mark.slow
def test_observe_leaves_the_collector_alone_by_default() -> None:
    out = _run(
        """
        import gc
        from opentelemetry.sdk.trace import TracerProvider
        from thalweg_bytewax.observability import observe

        def tracked(obj):  # in a collected generation (a frozen object is in none)
            return any(o is obj for o in gc.get_objects())

        before = gc.get_freeze_count()
        provider = TracerProvider()
        observe(tracing_provider=provider)
        assert gc.get_freeze_count() == before, "observe() froze without being asked"
        assert tracked(provider), "the tracer provider was taken from the collector"
        print("ok")
        """
    )
    assert out.splitlines()[-1] == "ok"


@pytest.mark.slow
def test_observe_freezes_what_is_alive_at_its_first_call_when_asked_and_only_then() -> None:
    out = _run(
        """
        import gc
        from opentelemetry.sdk.trace import TracerProvider
        from thalweg_bytewax.observability import observe, reset

        def tracked(obj):  # in a collected generation (a frozen object is in none)
            return any(o is obj for o in gc.get_objects())

        before = gc.get_freeze_count()
        provider = TracerProvider()
        assert tracked(provider)
        observe(tracing_provider=provider, freeze_gc=True)
        frozen = gc.get_freeze_count()
        assert frozen > before
        assert not tracked(provider), "the tracer provider was left to the collector"
        later = {"built": ["after observe()"]}
        reset()
        observe(tracing_provider=provider, freeze_gc=True)
        # (frozen objects that die leave the permanent generation: it only shrinks)
        assert gc.get_freeze_count() <= frozen, "a second observe() froze again"
        assert tracked(later), "an object built after the first observe() was frozen"
        print("ok")
        """
    )
    assert out.splitlines()[-1] == "ok"
