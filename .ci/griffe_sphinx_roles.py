"""Griffe extension: Sphinx cross-reference roles in docstrings become API links.

The docstrings name other objects the Sphinx way (``:class:`ContractSpec```,
``:meth:`~thalweg_bytewax.sql.SqlSession.query```, ``:mod:`.gate```), which the site's
generator (mkdocstrings, Markdown) would show as literal text. Once the package is
loaded, this extension rewrites every docstring: each role's target is resolved in the
scope of the object that carries the docstring (its members, its module's imports, its
parents), and the role becomes an optional cross-reference that mkdocs-autorefs turns
into a link when the target is rendered on some page, and into plain code otherwise (an
object of another library, a private helper), so ``mkdocs build --strict`` never fails
on one. The sources keep their roles; nothing is edited there.

Roles handled: ``class``, ``func``, ``meth``, ``attr``, ``mod``, ``exc``, ``data``,
``obj`` (also with a ``py:`` domain), with Sphinx's ``~`` (show the last component
only), a leading ``.`` (relative to the module's package) and ``Title <target>``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|mod|exc|data|obj):`(?P<body>[^`]+)`",
)
_TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")


def _module(obj: griffe.Object) -> griffe.Module:
    while not obj.is_module:
        assert obj.parent is not None
        obj = obj.parent
    assert isinstance(obj, griffe.Module)
    return obj


def resolve_target(obj: griffe.Object, target: str, index: dict[str, list[str]]) -> str:
    """The full dotted path ``target`` names in the scope of ``obj``.

    A name the scope does not know is looked up in ``index`` (every object of the
    package by its name) when exactly one object bears it; otherwise it is returned as
    written: the reference stays optional, so it renders as code, not as a broken link.
    """
    if target.startswith("."):
        module = _module(obj)
        package = module if module.is_init_module else module.parent
        base = package.path if package is not None else module.path
        dots = len(target) - len(target.lstrip("."))
        parts = base.split(".")
        if dots > 1:
            parts = parts[: -(dots - 1)] or parts
        return ".".join([*parts, target.lstrip(".")])
    head, _, rest = target.partition(".")
    try:
        resolved = obj.resolve(head)
    except (griffe.NameResolutionError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        candidates = index.get(head, [])
        if len(candidates) != 1:
            return target
        resolved = candidates[0]
    return f"{resolved}.{rest}" if rest else resolved


def rewrite(obj: griffe.Object, text: str, index: dict[str, list[str]]) -> str:
    """``text`` with each Sphinx role replaced by an optional cross-reference."""

    def replace(match: re.Match[str]) -> str:
        body = match["body"].strip()
        titled = _TITLED.match(body)
        if titled:
            title, target = titled["title"], titled["target"].strip()
        else:
            target = body
            title = body.lstrip("~").rsplit(".", 1)[-1] if body.startswith("~") else body
        identifier = resolve_target(obj, target.lstrip("~"), index)
        return (
            f'<autoref identifier="{html.escape(identifier)}" optional>'
            f"<code>{html.escape(title)}</code></autoref>"
        )

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring in a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:  # noqa: ARG002
        """Walk the package once it is fully loaded (its imports known)."""
        objects = list(_walk(pkg))
        index: dict[str, list[str]] = {}
        for obj in objects:
            index.setdefault(obj.name, []).append(obj.path)
        for obj in objects:
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj, obj.docstring.value, index)


def _walk(pkg: griffe.Module) -> list[griffe.Object]:
    """Every object of ``pkg`` (aliases left out: they share their target's docstring)."""
    found: list[griffe.Object] = []
    stack: list[griffe.Object] = [pkg]
    while stack:
        obj = stack.pop()
        found.append(obj)
        stack.extend(m for m in obj.members.values() if isinstance(m, griffe.Object))
    return found
