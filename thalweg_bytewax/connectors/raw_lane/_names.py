"""Private: the names in a lane: finalized files, staging files, topic directories, markers.

A finalized file is named for the offsets it holds (``<first>-<last>.parquet``); staging
files and the lane's own records start with ``.``, so pyarrow datasets and DuckDB globs
never read them.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse

__all__ = [
    "FINAL_NAME",
    "LANE_MARKER",
    "SCHEMA_RECORD",
    "STAGING_PREFIX",
    "final_name",
    "staging_prefix",
    "topic_dir_name",
]

STAGING_PREFIX = ".staging-"
"""Staging files start with ``.``: pyarrow datasets and DuckDB globs never read them."""
LANE_MARKER = ".thalweg-lane"
"""The file naming the one step that writes a lane (hidden from readers)."""
FINAL_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")
"""Finalized file names: ``<first offset>-<last offset>.parquet``, zero-padded."""
SCHEMA_RECORD = re.compile(r"^\.thalweg-schema-(\d{8})\.arrow$")
"""The lane's schema versions (hidden from readers): ``.thalweg-schema-<version>.arrow``."""

_MAX_DIR_NAME = 200


def final_name(first: int, last: int) -> str:
    """The deterministic file name of a finalized span of offsets."""
    return f"{first:020d}-{last:020d}.parquet"


def staging_prefix(shard: int) -> str:
    """The name prefix of the staging files of sink shard ``shard``.

    A shard owns its topic-partitions alone, so at start it removes the staging files
    its previous run left behind (``.staging-s003-…``) wherever they are, even in
    partitions it never writes again, without touching another shard's live files.
    """
    return f"{STAGING_PREFIX}s{shard:03d}-"


def topic_dir_name(topic: str) -> str:
    """A directory name for ``topic`` that is safe, reversible where short, and visible.

    Characters outside ``[A-Za-z0-9._-]`` are percent-encoded; a leading ``.`` or ``_``
    (``__consumer_offsets``) is encoded too, because readers skip such names. Names
    longer than 200 characters keep a prefix plus a digest, so they stay unique.
    """
    name = urllib.parse.quote(topic, safe="-._")
    if name[:1] in (".", "_"):
        name = f"%{ord(name[0]):02X}{name[1:]}"
    if len(name) > _MAX_DIR_NAME:
        digest = hashlib.blake2b(topic.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        name = f"{name[:150]}~{digest}"
    return name
