"""Private: where an ``ArrowIPCSource`` finds its files, in what order, and the follow watch.

Files are grouped by directory (one directory is one source partition under an
``ArrowIPCSink``) and ordered by the offsets their names carry; a glob is matched
below its fixed base. A following source re-lists the directory on a thread and logs
the files finalized since the start, once.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from thalweg_bytewax.connectors._shared_thread import SharedThread

__all__ = ["FileWatch", "IPCFiles", "by_directory", "read_order", "split_glob"]

logger = logging.getLogger(__name__)

COMPONENT = "arrow ipc source"
_IPC_SUFFIXES = (".arrow", ".arrows")
_MAGIC = re.compile(r"[*?\[]")
# `<first offset>-<last offset>.arrow[s]`, the names ArrowIPCSink finalizes.
_OFFSET_NAME = re.compile(r"(\d+)-(\d+)\.arrows?")


@dataclass(frozen=True)
class IPCFiles:
    """Where the files are: a file system, a base path, and an optional glob under it."""

    fs: pafs.FileSystem
    base: str
    pattern: re.Pattern[str] | None
    local: bool

    def list(self) -> list[str]:
        """The visible IPC files, sorted: names starting with ``.`` or ``_`` are skipped.

        A directory is listed recursively (its ``.arrow`` and ``.arrows`` files); a glob
        keeps the files it matches (``*`` within one path segment, ``**`` across
        segments); a file path lists itself.
        """
        info = self.fs.get_file_info(self.base)
        if self.pattern is None and info.type == pafs.FileType.File:
            return [self.base]
        if info.type != pafs.FileType.Directory:
            return []
        selector = pafs.FileSelector(self.base, allow_not_found=True, recursive=True)
        root = self.base.rstrip("/") + "/"
        found = []
        for entry in self.fs.get_file_info(selector):
            if entry.type != pafs.FileType.File:
                continue
            rel = entry.path[len(root) :] if entry.path.startswith(root) else entry.base_name
            if any(part.startswith((".", "_")) for part in rel.split("/")):
                continue  # staging files, markers, readers' hidden names
            if self.pattern is not None:
                if self.pattern.fullmatch(rel):
                    found.append(entry.path)
            elif entry.base_name.endswith(_IPC_SUFFIXES):
                found.append(entry.path)
        return sorted(found)


def read_order(path: str) -> tuple[int, int, int, str]:
    """Where a file comes in its directory's read order: by offsets, then by name.

    Files named ``<first offset>-<last offset>.arrow`` (or ``.arrows``), as
    ``ArrowIPCSink`` names them, come first, in numeric offset order (zero padding or
    not); any other file follows, by name.
    """
    name = path.rpartition("/")[2]
    found = _OFFSET_NAME.fullmatch(name)
    if found is None:
        return (1, 0, 0, name)
    return (0, int(found.group(1)), int(found.group(2)), name)


def by_directory(paths: Sequence[str]) -> dict[str, list[str]]:
    """The files grouped by their directory (a source partition), each in read order."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(path.rpartition("/")[0] or "/", []).append(path)
    return {d: sorted(files, key=read_order) for d, files in sorted(groups.items())}


def split_glob(path: str) -> tuple[str, re.Pattern[str] | None]:
    """Split ``path`` into the directory before its first glob segment, and a pattern."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _MAGIC.search(part):
            base = "/".join(parts[:i]) or "/"
            return base, re.compile(_translate("/".join(parts[i:])))
    return path, None


def _translate(glob: str) -> str:
    """A glob over ``/``-separated paths as a regex (``**`` spans segments)."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) > 0:
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out.append(f"[^{body[1:]}]" if body[:1] == "!" else f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


class FileWatch(SharedThread):
    """Re-list the files every ``interval_s`` and log the ones not listed at start, once.

    Bytewax lists a ``FixedPartitionedSource``'s partitions once, so a file finalized
    after the start becomes a partition only when the flow restarts. Shared by the
    partitions of one source in one process; the thread runs while one holds it, so
    ``next_batch`` never waits on a listing.
    """

    def __init__(self, files: IPCFiles, listed: list[str], interval_s: float) -> None:
        super().__init__("thalweg-ipc-watch")
        self._files = files
        self._listed = frozenset(listed)
        self._interval_s = interval_s
        self.unread: tuple[str, ...] = ()
        """Files that exist now but were not listed at start: read after a restart."""
        self.checks = 0
        """Listings done."""

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval_s):
            self.check()

    def check(self) -> None:
        """List once; log the files that appeared since the last change, once."""
        try:
            now = self._files.list()
        except (OSError, pa.ArrowException) as exc:
            logger.debug("%s: listing `%s` failed (%s)", COMPONENT, self._files.base, exc)
            return
        self.checks += 1
        unread = tuple(p for p in now if p not in self._listed)
        if unread and unread != self.unread:
            new = [p for p in unread if p not in self.unread]
            self.unread = unread
            logger.warning(
                "%s: %s new files under `%s` since the flow started (e.g. `%s`); they are "
                "read when the flow restarts (Bytewax lists partitions once)",
                COMPONENT,
                len(new),
                self._files.base,
                new[0],
            )
