"""The message manifest, the package graph, and the round-trip check of a bundle.

The round trip: the ``.pb`` is loaded into a fresh ``DescriptorPool`` (so it is
self-contained), and the rendered per-package ``.proto`` files are compiled again
with the same protoc; the message and enum descriptors of both, normalised (sorted,
JSON names and source positions dropped), must be equal. A cyclic package graph
cannot compile per package (protobuf forbids circular imports): then only the pool
check runs and the cycle is reported.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

from thalweg_bytewax.codecs._proto_pool import pool_from_files
from thalweg_bytewax.errors import SchemaError
from thalweg_bytewax.protobundle._compile import _run_protoc, import_cycles, well_known_dir
from thalweg_bytewax.protobundle._errors import BundleError
from thalweg_bytewax.protobundle._render import is_well_known

__all__ = ["inventory", "manifest", "package_cycles", "verify_round_trip"]


def _messages(
    scope: str, msgs: Sequence[descriptor_pb2.DescriptorProto]
) -> list[tuple[str, descriptor_pb2.DescriptorProto]]:
    out: list[tuple[str, descriptor_pb2.DescriptorProto]] = []
    for m in msgs:
        if m.options.map_entry:
            continue
        full = f"{scope}.{m.name}" if scope else m.name
        out.append((full, m))
        out += _messages(full, m.nested_type)
    return out


def manifest(
    fds: descriptor_pb2.FileDescriptorSet, origins: Mapping[str, tuple[str, str]]
) -> dict[str, Any]:
    """Every message type of the bundle: name, file, include root, entry-point flag.

    A message is an entry point (``"entry": true``) when no field of any other
    message has its type: the envelopes a topic carries. Well-known types are left
    out.

    Args:
        fds: The bundle.
        origins: Import path -> ``(source path, include root)`` of each source file.

    Returns:
        ``{"messages": [...], "entry_points": [...]}``, sorted by name.
    """
    referenced: set[str] = set()
    found: list[tuple[str, str]] = []
    for fd in fds.file:
        for full, m in _messages(fd.package, fd.message_type):
            referenced.update(
                f.type_name.lstrip(".")
                for f in m.field
                if f.type_name and f.type_name != f".{full}"
            )
            for n in m.nested_type:
                if n.options.map_entry:
                    referenced.update(f.type_name.lstrip(".") for f in n.field if f.type_name)
            if not is_well_known(fd.name):
                found.append((full, fd.name))
    messages = [
        {
            "name": name,
            "file": file,
            "source": origins.get(file, ("", ""))[0],
            "include_root": origins.get(file, ("", ""))[1],
            "entry": name not in referenced,
        }
        for name, file in sorted(found)
    ]
    return {
        "messages": messages,
        "entry_points": [m["name"] for m in messages if m["entry"]],
    }


def package_cycles(fds: descriptor_pb2.FileDescriptorSet) -> list[list[str]]:
    """Cycles in the package graph, which the per-package rendering cannot compile.

    Package A imports B and B imports A, perhaps through others.
    """
    pkg_of = {f.name: f.package for f in fds.file}
    graph: dict[str, list[str]] = {}
    for fd in fds.file:
        if is_well_known(fd.name):
            continue
        deps = graph.setdefault(fd.package, [])
        for dep in fd.dependency:
            target = pkg_of.get(dep, fd.package)
            if target != fd.package and not is_well_known(dep) and target not in deps:
                deps.append(target)
    return import_cycles(graph)


def inventory(fds: descriptor_pb2.FileDescriptorSet) -> dict[str, Any]:
    """The normalised type set of a bundle: message and enum descriptors by full name.

    File names, JSON names and source info are left out: what must survive a rendering.
    """
    out: dict[str, Any] = {}

    def enums(scope: str, items: Sequence[descriptor_pb2.EnumDescriptorProto]) -> None:
        for e in items:
            full = f"{scope}.{e.name}" if scope else e.name
            out[f"enum {full}"] = sorted((v.name, v.number) for v in e.value)

    for fd in fds.file:
        if is_well_known(fd.name):
            continue
        enums(fd.package, fd.enum_type)
        for full, m in _messages(fd.package, fd.message_type):
            enums(full, m.enum_type)
            oneofs = [o.name for o in m.oneof_decl]
            out[f"message {full}"] = sorted(
                (
                    f.name,
                    f.number,
                    f.label,
                    f.type,
                    f.type_name,
                    oneofs[f.oneof_index] if f.HasField("oneof_index") else "",
                    f.proto3_optional,
                    f.default_value,
                )
                for f in m.field
            )
            out[f"reserved {full}"] = sorted(
                [(r.start, r.end) for r in m.reserved_range] + [(n, 0) for n in m.reserved_name],
                key=str,
            )
    return out


def verify_round_trip(
    fds: descriptor_pb2.FileDescriptorSet, rendered: Mapping[str, str], *, origin: str
) -> bool:
    """Check the bundle loads on its own and its rendering compiles back to it.

    Args:
        fds: The bundle.
        rendered: The per-package files, file name -> text.
        origin: The source, for messages.

    Returns:
        ``True`` when the rendering was recompiled and matched; ``False`` when the
        package graph is cyclic, so only the pool check ran.

    Raises:
        BundleError: When the ``.pb`` does not load into a fresh pool, or the
            rendering compiles to different types (a printer defect, with the types
            that differ).
    """
    try:
        pool = pool_from_files(list(fds.file))
    except SchemaError as exc:
        msg = f"proto bundle `{origin}`: the .pb does not load into a DescriptorPool ({exc})"
        raise BundleError(msg) from exc
    loaded = descriptor_pb2.FileDescriptorSet()
    for fd in fds.file:
        pool.FindFileByName(fd.name).CopyToProto(loaded.file.add())
    _same(inventory(fds), inventory(loaded), origin, "the DescriptorPool's copy")
    if package_cycles(fds):
        return False
    with tempfile.TemporaryDirectory(prefix="twg-proto-verify-") as tmp:
        stage = Path(tmp) / "stage"
        stage.mkdir()
        for name, text in rendered.items():
            (stage / name).write_text(text, encoding="utf-8")
        again = _run_protoc(
            stage, sorted(rendered), well_known_dir(), Path(tmp) / "again.pb", origin
        )
    _same(inventory(fds), inventory(again), origin, "the rendered .proto files")
    return True


def _same(want: Mapping[str, Any], got: Mapping[str, Any], origin: str, what: str) -> None:
    if want != got:
        differ = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
        msg = f"proto bundle `{origin}`: {what} do not match the .pb's types"
        raise BundleError(msg, [f"differs: `{k}`" for k in differ[:20]])

