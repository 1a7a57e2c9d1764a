"""The three layers of a configuration — TOML file, ``THALWEG_*`` environment, ``--set``.

Each layer becomes a nested mapping under the model's field names plus, for every key it
sets, where that key came from (the file, the variable, the flag), so an error can name
the place to fix. Layers merge key by key: a later layer replaces a value, and tables
merge.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "Layer",
    "annotation_at",
    "element",
    "env_layer",
    "env_name",
    "file_layer",
    "merge",
    "override_layer",
    "submodel",
    "submodels",
    "union_tag",
]

ENV_PREFIX = "THALWEG_"
"""The prefix of every environment variable thalweg reads."""
CONFIG_ENV = "THALWEG_CONFIG"
"""The variable naming the TOML file to load when no file is given explicitly."""
NESTED = "__"
"""Separates nested keys in a variable name: ``THALWEG_SINKS__ICEBERG__WAREHOUSE``."""

Path_ = tuple[str, ...]
"""A key path: ``("sinks", "postgres", "dsn")``."""


@dataclass
class Layer:
    """One layer's values and where each key came from.

    Attributes:
        values: Nested mapping under the model's field names.
        origins: For each key path set, how to name its source in a message
            (``"in `pipeline.toml`"``, ``"`THALWEG_TOPIC`"``, ``"`--set topic`"``).
        kind: ``"file"``, ``"env"`` or ``"cli"``.
    """

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[Path_, str] = field(default_factory=dict)
    kind: str = "file"


def env_name(path: Iterable[str]) -> str:
    """The environment variable that sets the key ``path``."""
    return ENV_PREFIX + NESTED.join(p.upper() for p in path)


def submodel(annotation: Any) -> type[BaseModel] | None:
    """The model class ``annotation`` is (or is optionally), else ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [m for a in typing.get_args(annotation) if (m := submodel(a)) is not None]
        return found[0] if len(found) == 1 else None
    return None


def submodels(annotation: Any) -> list[type[BaseModel]]:
    """Every model class ``annotation`` may be: one, or the members of a union of models.

    A union told apart by ``kind`` (a pipeline's ``[source]``, each ``[sinks.<name>]``)
    has several.
    """
    if typing.get_origin(annotation) is typing.Annotated:
        return submodels(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in submodels(a)]
    return []


def union_tag(member: type[BaseModel]) -> str:
    """The ``kind`` that picks ``member`` in a union of models (``kafka``, ``parquet``).

    The value its ``kind`` literal allows; a model without one is named by its class.
    """
    field = member.model_fields.get("kind")
    tags = typing.get_args(field.annotation) if field is not None else ()
    return str(tags[0]) if tags else member.__name__


def element(annotation: Any) -> Any:
    """The item annotation of a list or the value annotation of a table, else ``None``.

    ``list[Window]`` gives ``Window``, ``dict[str, Sink]`` gives ``Sink``; an optional
    container (``list[X] | None``) is seen through.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin in (dict, Mapping) and len(args) == 2:  # noqa: PLR2004 - key and value
        return args[1]
    if origin in (typing.Union, types.UnionType):
        found = [e for a in args if (e := element(a)) is not None]
        return found[0] if len(found) == 1 else None
    return None


def _field(models: list[type[BaseModel]], key: str) -> Any:
    """The annotation of ``key`` (a field name or alias) in the first of ``models`` with it."""
    for model in models:
        for name, info in model.model_fields.items():
            if key in (name, info.alias):
                return info.annotation
    return None


def annotation_at(model: type[BaseModel], path: Iterable[str | int]) -> Any:
    """The annotation of the key ``path`` under ``model`` (``None`` when unknown).

    A path steps into lists by index and into tables of sections by key:
    ``("windows", 0, "size_s")``, ``("sinks", "orders", "dsn")``. Under a union of
    sections (``[sinks.<name>]``, one model per ``kind``) a key is looked up in each.
    """
    current: list[type[BaseModel]] = [model]
    annotation: Any = None
    for part in path:
        found = _field(current, part) if isinstance(part, str) else None
        if found is not None:
            annotation = found
        elif not current and (inner := element(annotation)) is not None:
            annotation = inner
        else:
            return None
        current = submodels(annotation)
    return annotation


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return False


def _text_value(model: type[BaseModel], path: Path_, raw: str) -> Any:
    """A variable's or flag's text as the field takes it: lists split on commas."""
    if _is_list(annotation_at(model, path)):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw


def _put(values: dict[str, Any], path: Path_, value: Any) -> None:
    node = values
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def _record(origins: dict[Path_, str], value: Any, path: Path_, where: str) -> None:
    origins[path] = where
    if isinstance(value, dict):
        for key, child in value.items():
            _record(origins, child, (*path, str(key)), where)


def file_layer(path: str | Path) -> Layer:
    """Read a TOML file as a layer.

    Raises:
        ConfigError: When the file is missing, unreadable or not TOML (naming the file
            and the line; tomllib's messages never quote the content).
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            values = tomllib.load(fh)
    except OSError as exc:
        msg = f"config file `{path}`: cannot read it ({exc.strerror}); check the path"
        raise ConfigError(msg) from None
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        msg = f"config file `{path}`: expected TOML; got {reason[:1].lower()}{reason[1:]}"
        raise ConfigError(msg) from None
    layer = Layer(values=values, kind="file")
    where = f"in `{path}`"
    for key, value in values.items():
        _record(layer.origins, value, (key,), where)
    return layer


def env_layer(model: type[BaseModel], env: Mapping[str, str]) -> Layer:
    """The ``THALWEG_*`` variables that name one of ``model``'s keys.

    ``THALWEG_TOPIC`` sets ``topic``; ``THALWEG_SINKS__ICEBERG__WAREHOUSE`` sets
    ``sinks.iceberg.warehouse``. An empty variable is ignored (the key keeps its default
    or the file's value). A variable whose first part names no field belongs to someone
    else (``THALWEG_CONFIG``, a test's ``THALWEG_TEST_KAFKA``) and is ignored; one that
    names a field but an unknown key below it is kept, so validation refuses it by name.
    An old name the model lists in ``old_names`` (``THALWEG_DEDUP_WINDOW_S``) is kept
    too: the model's validator moves it to its new name with a warning, or refuses it
    beside the new one.
    """
    layer = Layer(kind="env")
    old_names: Mapping[str, str] = getattr(model, "old_names", {})
    for var in sorted(env):
        raw = env[var]
        if not var.startswith(ENV_PREFIX) or not raw or var == CONFIG_ENV:
            continue
        path = tuple(p.lower() for p in var[len(ENV_PREFIX) :].split(NESTED))
        keys = {f.alias or name for name, f in model.model_fields.items()}
        known = path[0] in keys | set(model.model_fields) or (
            len(path) == 1 and path[0] in old_names
        )
        if not known or not all(path):
            continue
        _put(layer.values, path, _text_value(model, path, raw))
        layer.origins[path] = f"`{var}`"
    return layer


def override_layer(model: type[BaseModel], overrides: Iterable[str]) -> Layer:
    """``key.path=value`` overrides (``--set``), each value taken as a variable's text.

    Raises:
        ConfigError: When an override is not ``key.path=value``.
    """
    layer = Layer(kind="cli")
    for item in overrides:
        key, eq, raw = item.partition("=")
        path = tuple(key.strip().split("."))
        if not eq or not all(path):
            msg = (
                f"`--set {key}`: expected `key.path=value` (e.g. `--set topic=orders`); "
                "got no `=` or an empty key part"
            )
            raise ConfigError(msg)
        _put(layer.values, path, _text_value(model, path, raw))
        layer.origins[path] = f"`--set {'.'.join(path)}`"
    return layer


def merge(layers: Iterable[Layer]) -> dict[str, Any]:
    """The layers' values merged, later layers winning key by key."""
    merged: dict[str, Any] = {}

    def _deep(into: dict[str, Any], values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                _deep(into[key], value)
            else:
                into[key] = _copy(value)

    for layer in layers:
        _deep(merged, layer.values)
    return merged


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value
