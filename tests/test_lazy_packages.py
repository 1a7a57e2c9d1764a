"""Every package that loads its names on first access still offers each of them.

The packages below keep their public names in a table and load each name's module on
first access (``thalweg_bytewax._lazy``). Each name a package lists in ``__all__``
must resolve to the object its home module defines, ``dir()`` must list it before it
is loaded, and a name the package does not have must raise ``AttributeError`` naming
the package, as a plain module does.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

from thalweg_bytewax._lazy import lazy_package

LAZY_PACKAGES = [
    "thalweg_bytewax.codecs",
    "thalweg_bytewax.connectors.arrow_ipc",
    "thalweg_bytewax.connectors.files",
    "thalweg_bytewax.connectors.iceberg",
    "thalweg_bytewax.connectors.kafka",
    "thalweg_bytewax.connectors.parquet",
    "thalweg_bytewax.connectors.postgres",
    "thalweg_bytewax.connectors.raw_lane",
    "thalweg_bytewax.contracts",
    "thalweg_bytewax.observability",
    "thalweg_bytewax.operators",
    "thalweg_bytewax.registry",
    "thalweg_bytewax.schemamodel",
    "thalweg_bytewax.sql",
    "thalweg_bytewax.windows",
]

# Packages whose ``__getattr__`` first warns about names that moved away, then hands
# every other name to the helper's.
OLD_NAMES_FIRST = {"thalweg_bytewax.windows"}


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        value = getattr(module, name)
        assert value is not None, f"{package}.{name}"
        assert name in vars(module), f"{package}.{name} is not kept after its first access"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_an_unknown_name_raises_attribute_error_naming_the_package(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
        module.nope  # noqa: B018


def _packages() -> list[str]:
    import thalweg_bytewax

    found = pkgutil.walk_packages(thalweg_bytewax.__path__, "thalweg_bytewax.")
    return ["thalweg_bytewax", *sorted(m.name for m in found if m.ispkg)]


@pytest.mark.parametrize("package", _packages())
def test_a_public_name_stays_itself_once_the_module_of_that_name_is_loaded(package: str) -> None:
    # The import system binds a loaded submodule to its package's attribute of that
    # name: a public name that is also a module's (`sql.transform_session` was both)
    # became the module as soon as anything imported it. A package may still have
    # such a module if it binds the public value over it (`operators.sql`).
    pkg = importlib.import_module(package)
    home = Path(pkg.__file__ or "").parent
    for name in getattr(pkg, "__all__", ()):
        if (home / f"{name}.py").exists() or (home / name / "__init__.py").exists():
            submodule = importlib.import_module(f"{package}.{name}")
            assert getattr(pkg, name) is not submodule, f"{package}.{name} is its module"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_package_loads_through_the_one_helper(package: str) -> None:
    # One implementation of the lazy names: a package's own copy would drift from it
    # (its error message, its dir(), the optional-extra hook).
    module = importlib.import_module(package)
    hooks: list[Callable[..., object]] = [module.__dir__]
    if package not in OLD_NAMES_FIRST:
        hooks.append(module.__getattr__)
    for hook in hooks:
        assert hook.__qualname__.startswith(f"{lazy_package.__name__}.<locals>."), (
            f"{package}.{hook.__name__} is its own; bind it from _lazy.lazy_package"
        )


def test_the_public_imports_users_write_still_work() -> None:
    import thalweg_bytewax.operators as twg
    from thalweg_bytewax.connectors.files import FileSource
    from thalweg_bytewax.connectors.iceberg import IcebergSink
    from thalweg_bytewax.connectors.kafka import KafkaSource

    assert twg.decode.__module__ == "thalweg_bytewax.operators.decoding"
    assert KafkaSource.__name__ == "KafkaSource"
    assert FileSource.__module__ == "thalweg_bytewax.connectors.files.source"
    assert IcebergSink.__module__ == "thalweg_bytewax.connectors.iceberg.sink"


def test_lazy_package_loads_a_name_once_and_keeps_it() -> None:
    namespace: dict[str, object] = {"__all__": ["dumps"]}
    asked: list[str] = []
    getattr_, dir_ = lazy_package("pkg", {"dumps": "json"}, namespace, before=asked.append)

    assert "dumps" in dir_()
    assert getattr_("dumps") is importlib.import_module("json").dumps
    assert namespace["dumps"] is importlib.import_module("json").dumps
    assert asked == ["json"]
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")
