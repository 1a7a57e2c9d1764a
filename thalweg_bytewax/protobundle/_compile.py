"""Check a reconciled source's imports, stage it under one root and compile it.

Before the compiler runs, every ``import`` of every file is resolved: all missing
imports (with the files that need them) and all import cycles are collected and
reported together, so one run names everything to fix. The files are then staged
under a single include root, so include order cannot change the result, and
compiled with the ``protoc`` that ``grpcio-tools`` bundles, ``--include_imports``: the
FileDescriptorSet holds every file it needs, Google's well-known types included.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2

from thalweg_bytewax._deps import require
from thalweg_bytewax.protobundle._discover import ProtoFile, Source
from thalweg_bytewax.protobundle._errors import BundleError

__all__ = ["closure", "compile_source", "import_cycles", "imports_of", "well_known_dir"]

_TOKENS = re.compile(
    rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.DOTALL
)
_IMPORT = re.compile(rb'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)
# protoc's own limit would be a missing file; a bound keeps a hostile tree cheap.
_PROTOC_TIMEOUT_S = 600


def _uncomment(text: bytes) -> bytes:
    """``text`` with comments blanked (strings kept, so ``"//"`` inside one survives)."""

    def blank(m: re.Match[bytes]) -> bytes:
        tok = m.group(0)
        return tok if tok[:1] in (b'"', b"'") else re.sub(rb"[^\n]", b" ", tok)

    return _TOKENS.sub(blank, text)


def imports_of(content: bytes) -> list[str]:
    """The import paths a ``.proto`` file's text names, in order."""
    return [m.decode("utf-8", "replace") for m in _IMPORT.findall(_uncomment(content))]


def well_known_dir() -> Path:
    """The directory of the ``google/protobuf/*.proto`` files ``grpcio-tools`` ships."""
    grpc_tools = require("grpc_tools", extra="proto")
    return Path(str(grpc_tools.__file__)).parent / "_proto"


def closure(source: Source, wkt: Path) -> tuple[dict[str, list[str]], list[str]]:
    """The import graph of the wanted files and everything they import.

    Returns:
        ``(graph, missing)``: ``graph`` maps each reachable source file to the source
        files it imports (well-known types left out); ``missing`` lists one problem
        per import no root provides, naming every file that needs it.
    """
    by_path = {f.import_path: f for f in source.files}
    graph: dict[str, list[str]] = {}
    needed_by: dict[str, list[str]] = {}
    todo = list(source.wanted)
    while todo:
        path = todo.pop()
        if path in graph:
            continue
        deps: list[str] = []
        for imp in imports_of(by_path[path].content):
            if imp in by_path:
                deps.append(imp)
                todo.append(imp)
            elif not (wkt / imp).is_file():
                needed_by.setdefault(imp, []).append(path)
        graph[path] = deps
    missing = [
        f"missing import `{imp}`, imported by "
        + ", ".join(f"`{by_path[r].path}`" for r in sorted(set(needed_by[imp])))
        + "; add the root that holds it with `--include-root`"
        for imp in sorted(needed_by)
    ]
    return graph, missing


def import_cycles(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Every import cycle, as the list of nodes around it.

    Tarjan's strongly connected components: a component of several nodes, or a node
    importing itself, is a cycle.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: deep import chains must not recurse
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    cycles.append(_ordered(comp, graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _ordered(comp: list[str], graph: Mapping[str, Sequence[str]]) -> list[str]:
    """The nodes of a strongly connected component as one walk around a cycle."""
    members = set(comp)
    start = min(comp)
    path, seen, node = [start], {start}, start
    while True:
        nxt = next((d for d in graph.get(node, ()) if d in members and d not in seen), None)
        if nxt is None:
            return path
        path.append(nxt)
        seen.add(nxt)
        node = nxt


def compile_source(source: Source, *, origin: str) -> descriptor_pb2.FileDescriptorSet:
    """Check imports, stage and compile a reconciled source.

    Args:
        source: The reconciled source.
        origin: The source as the user named it, for messages.

    Returns:
        The FileDescriptorSet of the wanted files and everything they import,
        dependencies before dependents.

    Raises:
        BundleError: Listing every conflict, missing import and import cycle at once,
            or protoc's own errors (with the original file paths).
    """
    wkt = well_known_dir()
    graph, missing = closure(source, wkt)
    by_path = {f.import_path: f for f in source.files}
    problems = [*source.conflicts, *missing]
    for cycle in import_cycles(graph):
        walk = " -> ".join(f"`{p}`" for p in [*cycle, cycle[0]])
        problems.append(f"import cycle {walk}; protobuf forbids circular imports")
    if problems:
        msg = f"proto bundle `{origin}`: {len(problems)} problem(s); fix them all and run again"
        raise BundleError(msg, problems)
    return _protoc([by_path[p] for p in sorted(graph)], wkt, origin)


def _protoc(files: Sequence[ProtoFile], wkt: Path, origin: str) -> descriptor_pb2.FileDescriptorSet:
    with tempfile.TemporaryDirectory(prefix="twg-proto-") as tmp:
        stage = Path(tmp) / "stage"
        for f in files:
            target = stage / f.import_path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.content)
        out = Path(tmp) / "bundle.pb"
        return _run_protoc(stage, [f.import_path for f in files], wkt, out, origin, files)


def _run_protoc(
    stage: Path,
    import_paths: Sequence[str],
    wkt: Path,
    out: Path,
    origin: str,
    files: Sequence[ProtoFile] = (),
) -> descriptor_pb2.FileDescriptorSet:
    """Run the bundled protoc in a child process (its errors go to the C stderr)."""
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={stage}",
        f"--proto_path={wkt}",
        "--include_imports",
        f"--descriptor_set_out={out}",
        *import_paths,
    ]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=_PROTOC_TIMEOUT_S, check=False
    )
    if done.returncode != 0 or not out.is_file():
        text = done.stderr
        for f in files:  # name the files where they are, not where they were staged
            text = text.replace(str(stage / f.import_path), str(f.path))
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        msg = f"proto bundle `{origin}`: protoc failed with {len(lines)} error(s); fix them"
        raise BundleError(msg, lines or [f"protoc exited with {done.returncode}"])
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(out.read_bytes())
    return fds
