"""Find the proto files of a source and keep one copy per import path.

A source is a ``.proto`` file (its directory is the include root), a repository whose
``src/main/proto`` directories are the include roots, or a plain directory that is
its own include root. Files are keyed by their path relative to their root, the path
an ``import`` statement names; the same path under two roots is collapsed only when
both copies are identical (a leading UTF-8 BOM aside), and is an error naming both
origins otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from thalweg_bytewax.errors import ConfigError

__all__ = [
    "DEFAULT_INCLUDE_GLOB",
    "SKIPPED_DIRS",
    "ProtoFile",
    "Source",
    "discover",
    "reconcile",
]

logger = logging.getLogger(__name__)

DEFAULT_INCLUDE_GLOB = "**/src/main/proto"
"""Directories that are include roots in a Maven / Gradle contracts repository."""

SKIPPED_DIRS = frozenset({".git", "target", "build", "node_modules", ".venv"})
"""Directory names never walked: build output and tool state (vendored copies)."""

_BOM = b"\xef\xbb\xbf"
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)

OnConflict = Literal["error", "first-wins"]
"""What to do when one import path has two different files: refuse, or keep the first."""


@dataclass(frozen=True)
class ProtoFile:
    """One ``.proto`` file found in a source.

    Attributes:
        import_path: The path an ``import`` names, relative to its root, ``/``-separated.
        path: Where the file is.
        root: The include root it was found under.
        content: Its bytes, a leading UTF-8 BOM removed.
        sha256: The hex digest of ``content``.
    """

    import_path: str
    path: Path
    root: Path
    content: bytes
    sha256: str


@dataclass(frozen=True)
class Source:
    """What a source resolved to.

    Attributes:
        roots: The include roots, in the order they were found.
        files: The files to bundle, one per import path.
        wanted: The import paths asked for: every file, or the one file given.
        duplicates: How many identical copies were collapsed.
        conflicts: Problems: import paths with different contents under two roots.
    """

    roots: tuple[Path, ...]
    files: tuple[ProtoFile, ...]
    wanted: tuple[str, ...]
    duplicates: int
    conflicts: tuple[str, ...]


def _roots_of(directory: Path, include_glob: str, exclude: frozenset[str]) -> list[Path]:
    found = sorted(
        p
        for p in directory.glob(include_glob)
        if p.is_dir() and not (set(p.relative_to(directory).parts) & (exclude | SKIPPED_DIRS))
    )
    return found or [directory]


def _file_root(path: Path) -> Path:
    """The include root of a lone ``.proto`` file.

    The directory its ``package`` names it under (``com/example/x.proto`` declaring
    ``package com.example;`` has the root above ``com``), else its own directory.
    """
    text = path.read_bytes().removeprefix(_BOM).decode("utf-8", "replace")
    m = _PACKAGE.search(text)
    parts = m.group(1).split(".") if m else []
    parent = path.parent
    if parts and len(parent.parts) > len(parts) and list(parent.parts[-len(parts) :]) == parts:
        return parent.parents[len(parts) - 1]
    return parent


def _walk(root: Path, exclude: frozenset[str]) -> list[Path]:
    skip = exclude | SKIPPED_DIRS
    return sorted(
        p
        for p in root.rglob("*.proto")
        if p.is_file() and not (set(p.relative_to(root).parts[:-1]) & skip)
    )


def _read(path: Path, root: Path) -> ProtoFile:
    data = path.read_bytes()
    data = data.removeprefix(_BOM)
    return ProtoFile(
        path.relative_to(root).as_posix(),
        path,
        root,
        data,
        hashlib.sha256(data).hexdigest(),
    )


def discover(
    source: str | Path,
    *,
    include_roots: Sequence[str | Path] = (),
    exclude: Sequence[str] = (),
    include_glob: str = DEFAULT_INCLUDE_GLOB,
) -> tuple[list[Path], list[ProtoFile], list[str] | None]:
    """Resolve a source to include roots and every ``.proto`` under them.

    Args:
        source: A ``.proto`` file, a repository, or a directory of ``.proto`` files.
        include_roots: Extra roots (e.g. another repository's contracts), each resolved
            like a directory source.
        exclude: Directory names whose subtrees are skipped (a vendored mirror).
        include_glob: The pattern that finds include roots in a repository.

    Returns:
        ``(roots, files, wanted)``: ``wanted`` is the one import path asked for when
        ``source`` is a file, else ``None`` (every file is wanted). ``files`` may hold
        several files per import path; :func:`reconcile` collapses them.

    Raises:
        ConfigError: When the source does not exist or holds no ``.proto`` file.
    """
    src = Path(source)
    skip = frozenset(exclude)
    if not src.exists():
        msg = f"proto bundle: source `{src}` does not exist; expected a .proto file or directory"
        raise ConfigError(msg)
    wanted: list[str] | None = None
    if src.is_file():
        if src.suffix != ".proto":
            msg = f"proto bundle: expected a `.proto` file or a directory; got `{src}`"
            raise ConfigError(msg)
        root = _file_root(src)
        roots = [root]
        wanted = [src.relative_to(root).as_posix()]
    else:
        roots = _roots_of(src, include_glob, skip)
    for extra in include_roots:
        extra_dir = Path(extra)
        if not extra_dir.is_dir():
            msg = f"proto bundle: include root `{extra_dir}` is not a directory"
            raise ConfigError(msg)
        roots += [r for r in _roots_of(extra_dir, include_glob, skip) if r not in roots]
    files = [_read(p, root) for root in roots for p in _walk(root, skip)]
    if not files:
        msg = (
            f"proto bundle: no `.proto` file under `{src}` (roots: "
            f"{', '.join(f'`{r}`' for r in roots)}); check the path and `--exclude`"
        )
        raise ConfigError(msg)
    logger.info("proto bundle: %d files under %d include roots", len(files), len(roots))
    return roots, files, wanted


def reconcile(
    roots: Sequence[Path],
    files: Sequence[ProtoFile],
    wanted: Sequence[str] | None,
    *,
    on_conflict: OnConflict = "error",
) -> Source:
    """Keep one file per import path, checking that duplicates are identical.

    Args:
        roots: The include roots, in discovery order (the first wins a conflict).
        files: Every file found.
        wanted: The import paths asked for, or ``None`` for all.
        on_conflict: ``"error"`` reports differing copies as conflicts;
            ``"first-wins"`` keeps the first root's copy and logs a warning.

    Returns:
        The reconciled source; its ``conflicts`` are empty unless ``on_conflict`` is
        ``"error"`` and two copies of one path differ.
    """
    by_path: dict[str, list[ProtoFile]] = {}
    for f in files:
        by_path.setdefault(f.import_path, []).append(f)
    kept: list[ProtoFile] = []
    duplicates = 0
    conflicts: list[str] = []
    for path in sorted(by_path):
        copies = by_path[path]
        kept.append(copies[0])
        duplicates += len(copies) - 1
        if len({c.sha256 for c in copies}) == 1:
            continue
        origins = ", ".join(f"`{c.path}` (sha256 {c.sha256[:12]})" for c in copies)
        if on_conflict == "first-wins":
            logger.warning(
                "proto bundle: `%s` differs between roots; kept `%s` (first wins) of %s",
                path,
                copies[0].path,
                origins,
            )
            continue
        conflicts.append(
            f"conflicting copies of `{path}`: {origins}; make them identical, "
            "`--exclude` one, or pass `--on-conflict first-wins`"
        )
    return Source(
        tuple(roots),
        tuple(kept),
        tuple(wanted) if wanted is not None else tuple(f.import_path for f in kept),
        duplicates,
        tuple(conflicts),
    )
