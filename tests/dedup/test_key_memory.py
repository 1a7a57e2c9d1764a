"""Dedup's key memory: bounded by the keys of one window, and resumable from a snapshot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from thalweg_bytewax.dedup import SeenWindow

HOUR = timedelta(hours=1)


def test_window_bounds_memory_and_forgets_old_keys():
    seen = SeenWindow(HOUR, allowed_skew=timedelta(0))
    # With the default skew (a minute, rounded up to a bucket) a bucket more is kept.
    with_skew = SeenWindow(HOUR)
    t0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    for i in range(100):  # one key a minute for 100 minutes
        assert not seen.check_and_add([f"k{i}"], t0 + 60 * i).any()
        with_skew.check_and_add([f"k{i}"], t0 + 60 * i)
    assert 60 <= len(seen) <= 60 + 60 // 16 + 1
    assert 61 <= len(with_skew) <= 60 + 2 * 60 / 16
    assert seen.check_and_add(["k99"], t0 + 6000).tolist() == [True]
    assert seen.check_and_add(["k0"], t0 + 6000).tolist() == [False]  # expired: new again
    restored = SeenWindow(HOUR, seen.snapshot())
    assert restored.check_and_add(["k98", "k1"], t0 + 6000).tolist() == [True, False]
