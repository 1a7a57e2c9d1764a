"""The window modules' names before they moved into ``thalweg_bytewax.windows`` still resolve.

``thalweg_bytewax.windows`` itself was dedup's key memory and clamped event time; it is
the windows package now, which still answers every name the module had: the event-time
names as its own, dedup's ``SeenWindow`` and ``key_values`` with a warning, so state
pickled under the old module name unpickles.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import warnings
from datetime import timedelta

import pytest

import thalweg_bytewax.windows
from thalweg_bytewax.dedup.key_memory import SeenWindow, key_values
from thalweg_bytewax.windows.aggregate import Tumbling

# Each old module's `__all__` as the release before the move had it.
OLD_PUBLIC = {
    "thalweg_bytewax.window_agg": (
        "AGG_FUNCTIONS COUNT PANE SOURCE TMAX TMIN Session Sliding Tumbling WindowPlan "
        "WindowSpec pre_aggregate split_by_key"
    ),
    "thalweg_bytewax.window_fold": "LATE_KEY WindowFolder late_schema",
}
OLD_WINDOWS = (
    "DEFAULT_ALLOWED_SKEW EventClock SeenWindow batch_time check_allowed_skew "
    "clamped_times key_values"
)


@pytest.mark.parametrize(("old", "names"), sorted(OLD_PUBLIC.items()))
def test_every_public_name_of_an_old_module_resolves(old: str, names: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"`{old}` moved to"):
        module = importlib.import_module(old)
    missing = [n for n in names.split() if not hasattr(module, n)]
    assert not missing, f"{old} lost {missing}"


def test_every_name_of_the_old_windows_module_resolves() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        missing = [n for n in OLD_WINDOWS.split() if not hasattr(thalweg_bytewax.windows, n)]
    assert not missing


def test_the_key_memory_under_its_old_module_warns_and_is_the_same_class() -> None:
    with pytest.warns(DeprecationWarning, match="moved to `thalweg_bytewax.dedup"):
        from thalweg_bytewax.windows import SeenWindow as old  # noqa: PLC0415
    assert old is SeenWindow
    with pytest.warns(DeprecationWarning, match="key_values"):
        assert thalweg_bytewax.windows.key_values is key_values


def test_key_memory_pickled_under_the_old_module_unpickles() -> None:
    seen = SeenWindow(timedelta(hours=1))
    seen.check_and_add(["a", "b"], 1_767_225_600.0)
    data = pickle.dumps(seen, protocol=2)
    old = data.replace(b"thalweg_bytewax.dedup.key_memory\n", b"thalweg_bytewax.windows\n")
    assert old != data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        restored = pickle.loads(old)
    assert isinstance(restored, SeenWindow)
    assert restored.check_and_add(["a", "c"], 1_767_225_601.0).tolist() == [True, False]


def test_a_window_spec_pickled_under_the_old_module_unpickles() -> None:
    data = pickle.dumps(Tumbling(timedelta(minutes=1)), protocol=2)
    old = data.replace(b"thalweg_bytewax.windows.aggregate\n", b"thalweg_bytewax.window_agg\n")
    assert old != data
    sys.modules.pop("thalweg_bytewax.window_agg", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert pickle.loads(old) == Tumbling(timedelta(minutes=1))
