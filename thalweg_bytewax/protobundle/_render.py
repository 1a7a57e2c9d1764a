"""Print a FileDescriptorSet back to ``.proto`` text: one file per package, or one file.

Rendered from the descriptors, never from the source text, so the output is canonical:
messages, enums, nested types, ``map<K, V>`` (rebuilt from the map-entry messages),
``oneof``, proto3 ``optional``, ``reserved`` ranges and names, proto2 labels and
defaults, ``deprecated`` / ``packed`` field options and services. Type references are
written fully qualified (``.pkg.Msg``), so no scoping rule can change their meaning.

Limits (checked by the round trip in ``_verify``): custom options and extensions are
not printed, nor file options (``java_package`` ...). Google's well-known types are
imported from their usual paths, never redefined. A per-package set compiles only when
the package graph is acyclic; a single file compiles only for a one-package source
(otherwise it is a labelled view).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from google.protobuf import descriptor_pb2

__all__ = ["is_well_known", "package_file", "render_package", "render_single"]

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {
    _FDP.TYPE_DOUBLE: "double",
    _FDP.TYPE_FLOAT: "float",
    _FDP.TYPE_INT64: "int64",
    _FDP.TYPE_UINT64: "uint64",
    _FDP.TYPE_INT32: "int32",
    _FDP.TYPE_FIXED64: "fixed64",
    _FDP.TYPE_FIXED32: "fixed32",
    _FDP.TYPE_BOOL: "bool",
    _FDP.TYPE_STRING: "string",
    _FDP.TYPE_BYTES: "bytes",
    _FDP.TYPE_UINT32: "uint32",
    _FDP.TYPE_SFIXED32: "sfixed32",
    _FDP.TYPE_SFIXED64: "sfixed64",
    _FDP.TYPE_SINT32: "sint32",
    _FDP.TYPE_SINT64: "sint64",
}
_MAX_FIELD = 536_870_911  # reserved ranges are end-exclusive in descriptors; "max" here


def is_well_known(name: str) -> bool:
    """Whether a file is one of Google's well-known types (never rendered)."""
    return name.startswith("google/protobuf/")


def package_file(package: str) -> str:
    """The file name of a package's rendering (``_default.proto`` for no package)."""
    return f"{package or '_default'}.proto"


def _type_ref(f: descriptor_pb2.FieldDescriptorProto) -> str:
    if f.type in (_FDP.TYPE_MESSAGE, _FDP.TYPE_ENUM, _FDP.TYPE_GROUP):
        return f.type_name  # fully qualified, with the leading dot
    return _SCALAR_NAMES[f.type]


def _string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field_options(f: descriptor_pb2.FieldDescriptorProto, syntax: str) -> str:
    opts: list[str] = []
    if syntax == "proto2" and f.HasField("default_value"):
        value = f.default_value
        text = _string(value) if f.type in (_FDP.TYPE_STRING, _FDP.TYPE_BYTES) else value
        opts.append(f"default = {text}")
    if f.options.HasField("packed"):
        opts.append(f"packed = {str(f.options.packed).lower()}")
    if f.options.deprecated:
        opts.append("deprecated = true")
    return f" [{', '.join(opts)}]" if opts else ""


def _reserved(ranges: Iterable[tuple[int, int]], names: Sequence[str], pad: str) -> list[str]:
    out: list[str] = []
    parts = [str(a) if a == b else f"{a} to {'max' if b >= _MAX_FIELD else b}" for a, b in ranges]
    if parts:
        out.append(f"{pad}reserved {', '.join(parts)};")
    if names:
        out.append(f"{pad}reserved {', '.join(_string(n) for n in names)};")
    return out


def _enum(e: descriptor_pb2.EnumDescriptorProto, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}enum {e.name} {{"]
    if e.options.allow_alias:
        lines.append(f"{pad}  option allow_alias = true;")
    lines += [f"{pad}  {v.name} = {v.number};" for v in e.value]
    lines += _reserved(
        ((r.start, r.end) for r in e.reserved_range), list(e.reserved_name), pad + "  "
    )
    return [*lines, f"{pad}}}"]


def _message(
    m: descriptor_pb2.DescriptorProto, depth: int, syntax: str, scope: str
) -> list[str]:
    pad = "  " * depth
    inner = pad + "  "
    full = f"{scope}.{m.name}"
    entries = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
    lines = [f"{pad}message {m.name} {{"]
    real_oneofs = {
        f.oneof_index for f in m.field if f.HasField("oneof_index") and not f.proto3_optional
    }
    done_oneofs: set[int] = set()
    for f in m.field:
        if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
            if f.oneof_index in done_oneofs:
                continue
            done_oneofs.add(f.oneof_index)
            lines.append(f"{inner}oneof {m.oneof_decl[f.oneof_index].name} {{")
            lines += [
                f"{inner}  {_type_ref(g)} {g.name} = {g.number}{_field_options(g, syntax)};"
                for g in m.field
                if g.HasField("oneof_index") and g.oneof_index == f.oneof_index
            ]
            lines.append(f"{inner}}}")
            continue
        lines.append(inner + _field(f, syntax, entries))
    for n in m.nested_type:
        if not n.options.map_entry:
            lines += _message(n, depth + 1, syntax, full)
    for e in m.enum_type:
        lines += _enum(e, depth + 1)
    lines += _reserved(
        ((r.start, r.end - 1) for r in m.reserved_range), list(m.reserved_name), inner
    )
    return [*lines, f"{pad}}}"]


def _field(
    f: descriptor_pb2.FieldDescriptorProto,
    syntax: str,
    entries: dict[str, descriptor_pb2.DescriptorProto],
) -> str:
    entry = entries.get(f.type_name) if f.label == _FDP.LABEL_REPEATED else None
    if entry is not None:
        key, value = entry.field[0], entry.field[1]
        return f"map<{_type_ref(key)}, {_type_ref(value)}> {f.name} = {f.number};"
    if f.label == _FDP.LABEL_REPEATED:
        label = "repeated "
    elif f.label == _FDP.LABEL_REQUIRED:
        label = "required "
    elif syntax == "proto2" or f.proto3_optional:
        label = "optional "
    else:
        label = ""
    return f"{label}{_type_ref(f)} {f.name} = {f.number}{_field_options(f, syntax)};"


def _service(s: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
    lines = [f"service {s.name} {{"]
    for m in s.method:
        cin = "stream " if m.client_streaming else ""
        cout = "stream " if m.server_streaming else ""
        lines.append(f"  rpc {m.name}({cin}{m.input_type}) returns ({cout}{m.output_type});")
    return [*lines, "}"]


def _syntax(files: Sequence[descriptor_pb2.FileDescriptorProto]) -> str:
    return "proto2" if any(f.syntax in ("", "proto2") for f in files) else "proto3"


def _body(files: Sequence[descriptor_pb2.FileDescriptorProto], syntax: str) -> list[str]:
    lines: list[str] = []
    for fd in files:
        scope = f".{fd.package}" if fd.package else ""
        for m in fd.message_type:
            lines += ["", *_message(m, 0, syntax, scope)]
        for e in fd.enum_type:
            lines += ["", *_enum(e, 0)]
        for s in fd.service:
            lines += ["", *_service(s)]
    return lines


def render_package(
    package: str,
    files: Sequence[descriptor_pb2.FileDescriptorProto],
    all_files: Sequence[descriptor_pb2.FileDescriptorProto],
) -> str:
    """One package's files as one ``.proto`` text that imports sibling packages.

    Args:
        package: The package name (``""`` for none).
        files: The descriptors of that package.
        all_files: Every descriptor of the set (to resolve what imports point at).

    Returns:
        The ``.proto`` text.
    """
    pkg_of = {f.name: f.package for f in all_files}
    imports: set[str] = set()
    for fd in files:
        for dep in fd.dependency:
            if is_well_known(dep):
                imports.add(dep)
            elif pkg_of.get(dep, package) != package:
                imports.add(package_file(pkg_of[dep]))
    syntax = _syntax(files)
    head = [f'syntax = "{syntax}";']
    if package:
        head += ["", f"package {package};"]
    if imports:
        head += ["", *(f'import "{i}";' for i in sorted(imports))]
    return "\n".join([*head, *_body(files, syntax)]).rstrip() + "\n"


def render_single(
    packages: dict[str, list[descriptor_pb2.FileDescriptorProto]],
    all_files: Sequence[descriptor_pb2.FileDescriptorProto],
) -> str:
    """Every package in one ``.proto`` text.

    With one package this is that package's rendering, a file that compiles on its
    own. With several it cannot be (one file holds one package): the packages follow
    one another under a banner that says so, for reading and diffing only.
    """
    if len(packages) == 1:
        ((name, files),) = packages.items()
        return render_package(name, files, all_files)
    parts = [
        "// Combined view of several packages: NOT a compilable file (a .proto file holds",
        "// one package). Compile the per-package files or use the .pb.",
    ]
    for name in sorted(packages):
        parts += ["", f"// ===== package {name or '(none)'} =====", ""]
        parts.append(render_package(name, packages[name], all_files).rstrip())
    return "\n".join(parts) + "\n"
