"""Config models as text: a commented starter file and the docs reference table.

A loaded config as TOML is :mod:`thalweg_bytewax.config._toml`.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from thalweg_bytewax.config._layers import env_name, submodel, submodels, union_tag
from thalweg_bytewax.config._secret import SecretRef
from thalweg_bytewax.config._toml import toml_key, toml_value

__all__ = ["render_reference", "render_starter"]


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if annotation is timedelta:
        return "duration (seconds or ISO-8601)"
    items = typing.get_args(annotation)
    if origin is tuple and len(items) == 2 and items[1] is Ellipsis:  # noqa: PLR2004 - tuple[X, ...]
        return f"list[{_type_name(items[0])}]"
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(annotation, "__name__", str(annotation))


def _doc(model: type[BaseModel]) -> str:
    """The first line of a model's docstring."""
    return (model.__doc__ or "").strip().split("\n")[0]


def _shown_default(info: FieldInfo) -> str:
    """A field's default as the reference table shows it."""
    if info.is_required():
        return "required"
    value = _default(info)[1]
    return "unset" if value is None else f"`{toml_value(value)}`"


def _describe(info: FieldInfo) -> str:
    return " ".join((info.description or "").split())


def _default(info: FieldInfo) -> tuple[bool, Any]:
    """``(has_default, default as JSON)``."""
    if info.is_required():
        return False, None
    value = info.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, timedelta):
        return True, value.total_seconds()  # a duration is written in seconds
    annotation: Any = info.annotation
    return True, TypeAdapter(annotation).dump_python(value, mode="json")


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo, type[BaseModel] | None]]:
    for name, info in model.model_fields.items():
        # A key is written as the file spells it: its alias (`from`) where it has one.
        # A union of models (a `[source]` of several kinds) is written as its default's
        # table; the reference lists every member's keys (`_union_rows`).
        sub = submodel(info.annotation)
        if sub is None and len(submodels(info.annotation)) > 1 and not info.is_required():
            sub = type(info.get_default(call_default_factory=True, validated_data={}))
        yield info.alias or name, info, sub


def _collection(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """``("list", M)`` for ``list[M]``, ``("dict", M)`` for ``dict[str, M]``, else None.

    ``M`` is a model, or a union of models told apart by ``kind`` (``[sinks.<name>]``),
    whose members :func:`_members` gives.
    """
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is list and args and (found := submodels(args[0])):
        return "list", found[0] if len(found) == 1 else args[0]
    if origin is dict and len(args) == 2 and (found := submodels(args[1])):  # noqa: PLR2004
        return "dict", found[0] if len(found) == 1 else args[1]
    return None


def _members(item: Any) -> list[tuple[str | None, type[BaseModel]]]:
    """The models ``item`` may be with their ``kind`` (``None`` for a single model)."""
    found = submodels(item)
    if len(found) == 1:
        return [(None, found[0])]
    return [(union_tag(model), model) for model in found]


def _example(info: FieldInfo, path: tuple[str, ...]) -> str:
    """A placeholder for a key with no default, of a shape its type takes."""
    if _mentions(info.annotation, SecretRef):
        return json.dumps(f"${{env:{'_'.join(path).upper()}}}")
    if typing.get_origin(info.annotation) is typing.Literal:
        return json.dumps(typing.get_args(info.annotation)[0])
    name = _type_name(info.annotation)
    if name.startswith(("list", "tuple", "set")):
        return "[]"
    if name.startswith(("int", "float")):
        return "0"
    if name.startswith("bool"):
        return "false"
    return '""'


def _mentions(annotation: Any, kind: type) -> bool:
    if annotation is kind:
        return True
    return any(_mentions(a, kind) for a in typing.get_args(annotation))


def render_starter(model: type[BaseModel], *, title: str) -> str:
    """A commented starter TOML for ``model``, one block per setting, from its fields.

    Every setting with a default is written commented out, with that default (the file
    loads to the defaults as written, and uncommenting a line changes nothing until the
    value is edited). A required setting is written uncommented with a placeholder, so
    the file fails to load naming it until it is filled in.

    Args:
        model: The config model.
        title: Who the file configures, for the header (e.g. ``flows.orders``).

    Returns:
        The file's text.
    """
    out = [
        f"# thalweg configuration: {title}",
        "#",
        "# Layers, later wins: this file < THALWEG_* environment variables < `--set key=value`.",
        '# Secrets are references, never values: "${env:NAME}" or "${file:/absolute/path}",',
        "# resolved only where they are used (`thalweg config secrets` lists them).",
        "# Check it with `thalweg config validate FILE`; see the merged result with",
        "# `thalweg config show FILE`.",
    ]

    def _block(
        node: type[BaseModel], prefix: tuple[str, ...], hash_: str, *, env: bool = True
    ) -> None:
        tables = []
        collections: list[tuple[str, FieldInfo, str, type[BaseModel]]] = []
        for name, info, sub in _fields(node):
            path = (*prefix, name)
            if sub is not None:
                tables.append((name, info, sub))
                continue
            if (kind := _collection(info.annotation)) is not None:
                collections.append((name, info, kind[0], kind[1]))
                continue
            out.append("")
            if text := _describe(info):
                out.append(f"# {text}")
            where = f"; environment: {env_name(path)}" if env else ""
            out.append(f"# type: {_type_name(info.annotation)}{where}")
            has, value = _default(info)
            if not has:
                out.append(f"{hash_}{toml_key(name)} = {_example(info, path)}  # required")
            elif value is None:
                out.append(f"# {toml_key(name)} = {_example(info, path)}  (unset by default)")
            else:
                out.append(f"# {toml_key(name)} = {toml_value(value)}")
        for name, info, sub in tables:
            path = (*prefix, name)
            # A section that is unset by default is written commented out, whole.
            optional = not info.is_required() and _default(info)[1] is None
            inner = "# " if optional or hash_ else ""
            out.extend(["", f"{inner}[" + ".".join(path) + "]"])
            if text := _describe(info):
                out.append(f"# {text}" + (" (unset by default)" if optional else ""))
            members = submodels(info.annotation)
            if len(members) > 1:
                kinds = ", ".join(f'"{union_tag(m)}"' for m in members if m is not sub)
                out.append(
                    f"# Other kinds: {kinds}; each takes its own keys (the configuration "
                    "reference lists them)."
                )
            _block(sub, path, inner, env=env)
        # Tables of many (`[[windows]]`, `[sinks.<name>]`): one commented example each,
        # with every key of an item; none by default.
        for name, info, shape, item in collections:
            dotted = ".".join((*prefix, name))
            header = f"[[{dotted}]]" if shape == "list" else f"[{dotted}.<name>]"
            # A union of sections (one per `kind`): one example table per kind.
            for tag, member in _members(item):
                out.extend(["", f"# {header}"])
                if text := _describe(info):
                    out.append(f"# {text} (none by default; repeat the table for each)")
                if tag is not None:
                    out.append(f"# An example of kind {json.dumps(tag)}: {_doc(member)}")
                _block(member, (*prefix, name, "NAME"), "# ", env=env and shape == "dict")

    _block(model, (), "")
    return "\n".join(out) + "\n"


def render_reference(model: type[BaseModel]) -> str:
    """A Markdown table of every setting of ``model``: key, type, default, variable, meaning.

    Args:
        model: The config model.

    Returns:
        The table (nested sections as dotted keys).
    """
    rows = [
        "| key | type | default | environment | meaning |",
        "|---|---|---|---|---|",
    ]

    def _rows(node: type[BaseModel], prefix: tuple[str, ...], *, env: bool = True) -> None:
        for name, info, sub in _fields(node):
            path = (*prefix, name)
            collection = _collection(info.annotation) if sub is None else None
            rows.append(_row(path, info, sub, collection, env=env))
            members = _members(info.annotation)
            if len(members) > 1:  # one section of several kinds (`[source]`)
                _union_rows(members, path, env=env, default=sub)
            elif sub is not None:
                _rows(sub, path, env=env)
            elif collection is not None:
                # One item's keys: `sinks.<name>.kind` (a table per name), `windows[].name`.
                shape, item = collection
                where = (*path, "<name>") if shape == "dict" else (*path, "[]")
                members = _members(item)
                if len(members) == 1:
                    _rows(members[0][1], where, env=env and shape == "dict")
                else:
                    _union_rows(members, where, env=env and shape == "dict")

    def _union_rows(
        members: list[tuple[str | None, type[BaseModel]]],
        prefix: tuple[str, ...],
        *,
        env: bool,
        default: type[BaseModel] | None = None,
    ) -> None:
        """Each key of a union's members once: ``kind`` first, then the keys all share.

        ``default`` is the member a section of several kinds is when unset (the sample
        source); a table of such sections (``[sinks.<name>]``) has none.
        """
        seen: dict[str, list[tuple[str, FieldInfo, type[BaseModel] | None]]] = {}
        for kind, member in members:
            for name, info, sub in _fields(member):
                seen.setdefault(name, []).append((kind or "", info, sub))
        order = sorted(seen, key=lambda n: (n != "kind", len(seen[n]) != len(members)))
        for name in order:
            takers = seen[name]
            _, info, sub = takers[0]
            path = (*prefix, name)
            collection = _collection(info.annotation) if sub is None else None
            texts: dict[str, list[str]] = {}
            for kind, taker, _ in takers:
                texts.setdefault(_describe(taker), []).append(kind)
            if name == "kind":
                kinds = ", ".join(f"`{k}`" for k, _, _ in takers)
                text = f"Which kind: {kinds}; it picks the keys below that apply."
            elif len(texts) == 1 and len(takers) == len(members):
                text = next(iter(texts))
            else:
                text = " ".join(f"{', '.join(ks)}: {t}" for t, ks in texts.items())
            defaults = {_shown_default(t) for _, t, _ in takers}
            cells = _row(path, info, sub, collection, env=env, text=text).split(" | ")
            if name == "kind":
                cells[1] = " \\| ".join(f'"{k}"' for k, _, _ in takers)
                cells[2] = "required" if default is None else f'`"{union_tag(default)}"`'
            elif len(defaults) > 1:  # e.g. `shards`: 16 for a lane, 1 for an Iceberg table
                shown = "; ".join(f"{k} {_shown_default(t)}" for k, t, _ in takers)
                cells[2] = shown.replace("|", "\\|")
            rows.append(" | ".join(cells))
            if sub is not None:
                _rows(sub, path, env=env)

    def _row(
        path: tuple[str, ...],
        info: FieldInfo,
        sub: type[BaseModel] | None,
        collection: tuple[str, Any] | None,
        *,
        env: bool,
        text: str | None = None,
    ) -> str:
        if sub is not None:
            has = not info.is_required()
            default = ("unset" if _default(info)[1] is None else "see below") if has else ""
        else:
            has, value = _default(info)
            default = "unset" if value is None else f"`{toml_value(value)}`"
            if collection is not None and has and not value:
                default = "none; see below"
        default = default if has else "required"
        text = (_describe(info) if text is None else text).replace("|", "\\|")
        kind = _type_name(info.annotation).replace("|", "\\|")
        variable = f"`{env_name(path)}`" if env else "—"
        key = ".".join(path).replace(".[]", "[]")
        return f"| `{key}` | {kind} | {default} | {variable} | {text} |"

    _rows(model, ())
    return "\n".join(rows) + "\n"
