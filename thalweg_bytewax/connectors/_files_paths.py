"""Private to :mod:`thalweg_bytewax.connectors.files`: paths, globs and URLs to files.

Local globs expand with :mod:`glob` (``**`` recursive), URL globs with the fsspec
filesystem of their scheme. A URL's ``?`` starts its query (a presigned URL's token),
so URL globs use ``*`` and ``[…]`` only. Messages name a URL without its credentials.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Mapping
from typing import Any

from thalweg_bytewax._deps import require
from thalweg_bytewax._redact import redact_origins_in, redact_url
from thalweg_bytewax.errors import ConfigError, SourceError

from ._files_partition import is_url

__all__ = ["expand", "has_magic"]

logger = logging.getLogger(__name__)


def has_magic(path: str) -> bool:
    """Whether ``path`` is a glob: ``*``, ``?`` or ``[``; in a URL only ``*`` and ``[``."""
    if is_url(path):  # a URL's `?` starts its query (a presigned URL's token)
        return any(c in path.split("?", 1)[0] for c in "*[")
    return any(c in path for c in "*?[")


def expand(entry: str, storage_options: Mapping[str, Any]) -> list[str]:
    """The files a path, glob or URL names: absolute local paths or URLs, sorted.

    Raises:
        SourceError: A local path (not a glob) with no file there: a missing input is
            not bad data, and not a configuration mistake either.
        ConfigError: A URL glob that cannot be listed (its credentials redacted from
            the message).
    """
    if is_url(entry):
        if not has_magic(entry):
            return [entry]
        fsspec = require("fsspec", extra="files")
        try:
            fs, path = fsspec.core.url_to_fs(entry, **storage_options)
            found = [fs.unstrip_protocol(p) for p in sorted(fs.glob(path))]
        except (OSError, ValueError) as exc:
            cause = redact_origins_in(str(exc), entry)
            msg = (
                f"file source: glob `{redact_url(entry)}` could not be listed "
                f"({type(exc).__name__}: {cause}); expected a reachable location"
            )
            raise ConfigError(msg) from None
        if not found:
            logger.warning("file source: glob `%s` matches no file", redact_url(entry))
        return found
    local = entry.removeprefix("file://")
    local = os.path.expanduser(local)
    if not has_magic(local):
        if not os.path.isfile(local):
            what = "a directory" if os.path.isdir(local) else "none there"
            msg = (
                f"file source: cannot read `{entry}`: expected an existing file; got "
                f"{what} (check the path, or use a glob to allow no match)"
            )
            raise SourceError(msg)
        return [os.path.abspath(local)]
    matches = sorted(p for p in glob.glob(local, recursive=True) if os.path.isfile(p))
    if not matches:
        logger.warning("file source: glob `%s` matches no file", entry)
    return [os.path.abspath(p) for p in matches]
