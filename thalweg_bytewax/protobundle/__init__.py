"""Bundle a proto source into one FileDescriptorSet, ``.proto`` renderings and a manifest.

``bundle(SRC, OUT)`` (and ``thalweg proto bundle SRC``) resolves a ``.proto`` file, a
directory, or a repository with many ``src/main/proto`` roots; keeps one file per
import path (identical duplicates collapse, differing ones are an error naming both
origins); lists every missing import and import cycle at once; compiles with the
protoc that ``grpcio-tools`` bundles; and writes:

* ``OUT/NAME.pb`` — the FileDescriptorSet (``--include_imports``), the authoritative
  artefact: ``ProtobufCodec(descriptor_set="OUT/NAME.pb", message_type=...)``;
* ``OUT/NAME/<package>.proto`` — one file per package, rendered from the descriptors;
* ``OUT/NAME.proto`` — one file: compilable for a one-package source, else a labelled
  view of all packages;
* ``OUT/NAME.messages.json`` — every message type with its file, include root and
  whether it is an entry point.

The rendering is verified by a round trip before anything is written (see
:func:`verify_round_trip`). Needs the ``proto`` extra.

Example:
    >>> from thalweg_bytewax.protobundle import bundle
    >>> result = bundle("contracts/", "out/")  # doctest: +SKIP
    >>> result.manifest["entry_points"]  # doctest: +SKIP
    ['com.example.orders.Order']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

from thalweg_bytewax.protobundle._compile import compile_source
from thalweg_bytewax.protobundle._discover import (
    DEFAULT_INCLUDE_GLOB,
    OnConflict,
    discover,
    reconcile,
)
from thalweg_bytewax.protobundle._errors import BundleError
from thalweg_bytewax.protobundle._render import (
    is_well_known,
    package_file,
    render_package,
    render_single,
)
from thalweg_bytewax.protobundle._verify import manifest, package_cycles, verify_round_trip

__all__ = ["DEFAULT_INCLUDE_GLOB", "Bundle", "BundleError", "bundle", "build_bundle"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bundle:
    """A compiled proto source and its derived artefacts.

    Attributes:
        name: The base name of the output files.
        descriptor_set: The FileDescriptorSet (dependencies first).
        packages: Rendered per-package files, file name -> ``.proto`` text.
        single: The one-file rendering.
        single_compiles: Whether ``single`` is a compilable file (one package).
        manifest: Message types with file, include root and entry-point flag.
        roots: The include roots found.
        duplicates: Identical duplicate files collapsed.
        package_cycles: Cycles between packages (the per-package files then do not
            compile; the ``.pb`` is unaffected).
        verified: Whether the rendering was compiled back and matched the ``.pb``.
        odcs: An ODCS v3 contract of the entry-point messages (YAML), when asked for.
        files: The paths written (empty until :meth:`write`).
    """

    name: str
    descriptor_set: descriptor_pb2.FileDescriptorSet
    packages: dict[str, str]
    single: str
    single_compiles: bool
    manifest: dict[str, Any]
    roots: tuple[Path, ...]
    duplicates: int
    package_cycles: tuple[tuple[str, ...], ...]
    verified: bool
    odcs: str | None = None
    files: tuple[Path, ...] = field(default=())

    def write(self, out_dir: str | Path) -> Bundle:
        """Write the artefacts under ``out_dir``; returns a copy listing the paths."""
        out = Path(out_dir)
        (out / self.name).mkdir(parents=True, exist_ok=True)
        written = {
            out / f"{self.name}.pb": self.descriptor_set.SerializeToString(),
            out / f"{self.name}.proto": self.single.encode(),
            out / f"{self.name}.messages.json": (
                json.dumps(self.manifest, indent=2, sort_keys=True) + "\n"
            ).encode(),
            **{out / self.name / n: t.encode() for n, t in self.packages.items()},
        }
        if self.odcs is not None:
            written[out / f"{self.name}.odcs.yaml"] = self.odcs.encode()
        for path, data in written.items():
            path.write_bytes(data)
        return Bundle(**{**self.__dict__, "files": tuple(written)})


def build_bundle(
    source: str | Path,
    *,
    name: str | None = None,
    include_roots: Sequence[str | Path] = (),
    exclude: Sequence[str] = (),
    include_glob: str = DEFAULT_INCLUDE_GLOB,
    on_conflict: OnConflict = "error",
) -> Bundle:
    """Discover, check, compile, render and verify a proto source (nothing written).

    Args:
        source: A ``.proto`` file, a directory of them, or a repository.
        name: Base name of the outputs (default: the source's stem).
        include_roots: Extra include roots (another repository's protos).
        exclude: Directory names whose subtrees are skipped.
        include_glob: The pattern that finds include roots in a repository.
        on_conflict: ``"error"`` (default) or ``"first-wins"`` for differing copies of
            one import path.

    Returns:
        The bundle.

    Raises:
        BundleError: Listing every conflict, missing import and import cycle, or
            protoc's errors, or a failed round trip.
        ConfigError: When the source does not exist or holds no ``.proto`` file.
        MissingDependencyError: Without ``grpcio-tools`` (the ``proto`` extra).
    """
    origin = str(source)
    roots, found, wanted = discover(
        source, include_roots=include_roots, exclude=exclude, include_glob=include_glob
    )
    src = reconcile(roots, found, wanted, on_conflict=on_conflict)
    fds = compile_source(src, origin=origin)
    mine = [f for f in fds.file if not is_well_known(f.name)]
    by_package: dict[str, list[descriptor_pb2.FileDescriptorProto]] = {}
    for f in mine:
        by_package.setdefault(f.package, []).append(f)
    packages = {
        package_file(p): render_package(p, files, fds.file) for p, files in by_package.items()
    }
    cycles = package_cycles(fds)
    verified = verify_round_trip(fds, packages, origin=origin)
    if cycles:
        logger.warning(
            "proto bundle %s: package cycles %s; the per-package files do not compile "
            "(the .pb is complete)",
            origin,
            cycles,
        )
    origins = {f.import_path: (str(f.path), str(f.root)) for f in src.files}
    return Bundle(
        name=name or Path(source).stem or "bundle",
        descriptor_set=fds,
        packages=packages,
        single=render_single(by_package, fds.file),
        single_compiles=len(by_package) == 1,
        manifest=manifest(fds, origins),
        roots=src.roots,
        duplicates=src.duplicates,
        package_cycles=tuple(tuple(c) for c in cycles),
        verified=verified,
    )


def bundle(source: str | Path, out_dir: str | Path, **options: Any) -> Bundle:
    """Build a bundle (:func:`build_bundle`, same options) and write it to ``out_dir``.

    Returns:
        The bundle, with :attr:`Bundle.files` listing what was written.
    """
    return build_bundle(source, **options).write(out_dir)
