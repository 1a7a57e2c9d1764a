"""The values of a plan moved to ``catalog.steps``; their old names still work, warning."""

from __future__ import annotations

import importlib
import pickle
import warnings

import pyarrow as pa
import pytest

import thalweg_bytewax.catalog
from thalweg_bytewax.catalog import steps

MOVED = steps.__all__


@pytest.mark.parametrize("name", MOVED)
def test_the_old_name_in_catalog_plan_warns_and_is_the_same_value(name: str) -> None:
    plan_module = importlib.import_module("thalweg_bytewax.catalog.plan")
    with pytest.warns(DeprecationWarning, match=f"moved to `thalweg_bytewax.catalog.steps.{name}`"):
        old = getattr(plan_module, name)
    assert old is getattr(steps, name)


def test_the_old_from_import_warns() -> None:
    with pytest.warns(
        DeprecationWarning, match="`thalweg_bytewax.catalog.plan.TableShape` moved"
    ) as caught:
        from thalweg_bytewax.catalog.plan import TableShape  # type: ignore[attr-defined]  # noqa: PLC0415
    assert TableShape is steps.TableShape
    assert caught[0].filename == __file__  # the warning points at the importing line


def test_the_new_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from thalweg_bytewax.catalog import Plan, TableShape  # noqa: PLC0415
        from thalweg_bytewax.catalog.plan import builtin_comment, plan  # noqa: PLC0415
        from thalweg_bytewax.catalog.steps import Column, Refuse  # noqa: PLC0415
    assert (Plan, TableShape, Column, Refuse) == (
        steps.Plan,
        steps.TableShape,
        steps.Column,
        steps.Refuse,
    )
    assert plan(  # the function works without reaching for a moved name
        "t", None, pa.schema([("id", pa.int64())]), target="postgres"
    ).result == TableShape((Column("id", pa.int64(), True),))
    assert builtin_comment("id") is None
    assert set(MOVED) <= set(vars(thalweg_bytewax.catalog)["__all__"])


def test_a_value_pickled_under_the_old_module_unpickles() -> None:
    written_before_the_move = b"cthalweg_bytewax.catalog.plan\nTableShape\n."
    with pytest.warns(DeprecationWarning, match="TableShape"):
        restored = pickle.loads(written_before_the_move)  # noqa: S301 - our own bytes
    assert restored is steps.TableShape


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    plan_module = importlib.import_module("thalweg_bytewax.catalog.plan")
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = plan_module.no_such_name
