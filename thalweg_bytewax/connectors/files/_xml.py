"""Private to :mod:`thalweg_bytewax.connectors.files`: XML records, streamed and bounded.

``record_path`` (``"/orders/order"``) names the record elements by the local names of
the elements from the root down; each record maps to a row by the rule of
:mod:`._xml_shape` (repeated names are lists, complex elements structs). Everything
outside the record elements is skipped.

The file is fed to lxml's pull parser 64 KiB at a time and the events are handled after
each piece, so on malformed XML every record that ended before the break is read and the
DLQ row names the first record not read, whatever buffering the libxml2 version does.
Each record element, and every element outside the records, is removed from the tree
once it has ended, so memory holds one record and one window of rows.

Nothing outside the file is ever read: entities are not substituted, no DTD is loaded,
no network is used, XInclude is not processed, and a file that declares an entity
(``<!ENTITY``, before its root element) is refused whole, so no entity is ever expanded.

Bounds (:class:`XmlLimits`) are checked while a record is parsed: a record nesting too
deep, with too many elements and attributes or spanning too many bytes is a DLQ row, and
its elements are dropped as they end, so the parse goes on in bounded memory. The
records themselves are walked by :mod:`._xml_records`; this module feeds it the file.
"""

from __future__ import annotations

from collections.abc import Iterator

from thalweg_bytewax._deps import require

from ._common import Chunk, ReadOptions, Target
from ._limits import XmlLimits
from ._xml_records import StopReading, XmlRecords

__all__ = ["FEED_BYTES", "read_xml"]

FEED_BYTES = 64 * 1024
"""Bytes handed to the parser at a time; its events are handled after each piece."""

# An entity declaration in the encodings libxml2 detects without a declaration.
_ENTITY_DECLS = tuple(
    "<!ENTITY".encode(enc) for enc in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
)


def _prolog_refusal(prolog: bytes, limits: XmlLimits) -> str | None:
    if any(decl in prolog for decl in _ENTITY_DECLS):
        return (
            "XML declares an entity (<!ENTITY before its root element); entities and DTDs "
            "are never read, so the file is not read; expand the entities before reading"
        )
    if len(prolog) > limits.max_prolog_bytes:
        return (
            f"XML has no root element in its first max_prolog_bytes={limits.max_prolog_bytes} "
            "bytes; the file is not read"
        )
    return None


def read_xml(
    target: Target,
    start: int,
    options: ReadOptions,
    *,
    record_path: str = "",
    xml_limits: XmlLimits | None = None,
) -> Iterator[Chunk]:
    """The record elements at ``record_path``, streamed, by windows of rows.

    XML is bounded by ``xml_limits`` (default :class:`XmlLimits`), not by the options'
    ``limits``.

    Raises:
        ConfigError: When the options' ``schema`` has a type records cannot map to (a
            map, a union).
    """
    etree = require("lxml.etree", extra="files")
    steps = [s for s in record_path.split("/") if s]
    walk = XmlRecords(
        target, start, options.schema, options.batch_rows, steps, xml_limits or XmlLimits()
    )
    parser = etree.XMLPullParser(
        events=("start", "end"),
        resolve_entities=False,
        load_dtd=False,
        dtd_validation=False,
        attribute_defaults=False,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    prolog: bytes | None = b""  # the bytes before the root element, until it starts
    try:
        with target.open() as f:
            try:
                while True:
                    piece = f.read(FEED_BYTES)
                    if not piece:
                        try:
                            parser.close()
                        except etree.XMLSyntaxError as exc:
                            # Newer libxml2 reports an end for every element still open
                            # at the premature end: those elements never ended, so the
                            # events of a failed close are not handled.
                            yield from walk.broken(exc)
                            return
                        yield from walk.handle(parser.read_events())
                        break
                    if prolog is not None:
                        prolog += piece
                        why = _prolog_refusal(prolog, walk.limits)
                        if why is not None:
                            yield walk.refused_file(why)
                            return
                    walk.fed_before = walk.fed
                    walk.fed += len(piece)
                    parser.feed(piece)
                    yield from walk.handle(parser.read_events())
                    if walk.rooted:
                        prolog = None
            except etree.XMLSyntaxError as exc:
                yield from walk.handle(parser.read_events())
                yield from walk.broken(exc)
                return
        yield from walk.flush()
    except StopReading:
        return
