"""A module that moved keeps working under its old name for one release.

Users' imports and, more importantly, their recovery stores name modules: Bytewax
pickles state by module and class name, so a store written before a move must
unpickle after it.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import warnings

import pytest

from thalweg_bytewax import _moved
from thalweg_bytewax.errors import ConfigError

OLD = "thalweg_bytewax._old_home_for_tests"


@pytest.fixture
def moved_errors(monkeypatch: pytest.MonkeyPatch) -> str:
    """``thalweg_bytewax.errors`` registered as moved from :data:`OLD`."""
    monkeypatch.setitem(_moved.MOVED, OLD, "thalweg_bytewax.errors")
    monkeypatch.delitem(sys.modules, OLD, raising=False)
    return OLD


def test_old_name_warns_and_gives_the_module_at_its_new_home(moved_errors: str) -> None:
    with pytest.warns(DeprecationWarning, match="moved to `thalweg_bytewax.errors`"):
        old = importlib.import_module(moved_errors)
    assert old is importlib.import_module("thalweg_bytewax.errors")
    assert old.ConfigError is ConfigError


def test_state_pickled_under_the_old_name_unpickles(moved_errors: str) -> None:
    # the GLOBAL opcode a pickle of the class written before the move holds
    written_before_the_move = b"c" + moved_errors.encode() + b"\nConfigError\n."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        restored = pickle.loads(written_before_the_move)
    assert restored is ConfigError


def test_unknown_names_still_fail_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("thalweg_bytewax._no_such_module")


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()) or [("", "")])
def test_every_moved_module_is_importable_by_its_old_name(old: str, new: str) -> None:
    if not old:
        return  # nothing has moved yet
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
