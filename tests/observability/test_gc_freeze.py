"""observe() freezes the objects alive at its first call, once per process.

Each case runs in a fresh interpreter: the garbage collector's permanent generation is
process-wide, and a test process has long since called ``observe()``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


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


def test_observe_freezes_what_is_alive_at_its_first_call_and_only_then() -> None:
    out = _run(
        """
        import gc
        from opentelemetry.sdk.trace import TracerProvider
        from thalweg_bytewax.observability import observe, reset

        def tracked(obj):  # in a collected generation (a frozen object is in none)
            return any(o is obj for o in gc.get_objects())

        assert gc.get_freeze_count() == 0
        provider = TracerProvider()
        assert tracked(provider)
        observe(tracing_provider=provider)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert not tracked(provider), "the tracer provider was left to the collector"
        later = {"built": ["after observe()"]}
        reset()
        observe(tracing_provider=provider)
        # (frozen objects that die leave the permanent generation: it only shrinks)
        assert gc.get_freeze_count() <= frozen, "a second observe() froze again"
        assert tracked(later), "an object built after the first observe() was frozen"
        print("ok")
        """
    )
    assert out.splitlines()[-1] == "ok"


def test_observe_with_freeze_gc_false_leaves_the_collector_alone() -> None:
    out = _run(
        """
        import gc
        from thalweg_bytewax.observability import observe

        observe(freeze_gc=False)
        print(gc.get_freeze_count())
        """
    )
    assert out.splitlines()[-1] == "0"
