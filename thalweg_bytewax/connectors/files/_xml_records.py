"""Private: the record elements of an XML parse as windows of rows, bounded.

:class:`XmlRecords` takes the pull parser's events of one file
(:func:`~thalweg_bytewax.connectors.files._xml.read_xml` feeds it): it finds the record
elements at ``record_path``, checks each against :class:`XmlLimits` while it is parsed
(depth, elements and attributes, bytes; a record past a bound is a DLQ row and its
elements are dropped as they end), maps each to a row by :mod:`._xml_shape`, infers a
schema from the first window when none is given, and frees every element once it has
ended, so memory holds one record and one window of rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError

from ._common import Bad, Chunk, Target, cast_rows
from ._limits import XmlLimits
from ._xml_shape import Plan, Refused, Shape, local, text_schema, typed_batch

__all__ = ["StopReading", "XmlRecords"]

logger = logging.getLogger(__name__)


def _drop(elem: Any) -> None:
    """Free an element that has ended: its content, and its place in its parent."""
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        parent.remove(elem)


class XmlRecords:
    """The record elements of one file, as windows of rows (see the module docstring)."""

    def __init__(
        self,
        target: Target,
        start: int,
        schema: pa.Schema | None,
        batch_rows: int,
        steps: list[str],
        limits: XmlLimits,
    ) -> None:
        self.name = target.name
        self.start = start
        self.schema = schema
        self.batch_rows = batch_rows
        self.steps = steps
        self.where = "/" + "/".join(steps)
        self.limits = limits
        self.text: pa.Schema | None = None
        self.plan: Plan | None = None
        if schema is not None:
            try:
                self.text = text_schema(schema, self.where)
            except TypeError as exc:
                msg = f"file source: XML `{self.name}`: {exc}"
                raise ConfigError(msg) from None
            self.plan = Plan(list(schema), strict=False, where=self.where)
        self.stack: list[str] = []  # open elements outside a record, by local name
        self.rooted = False  # the root element has started
        self.index = 0  # the next record's row index
        self.fed = 0  # bytes fed to the parser
        self.fed_before = 0  # bytes fed before the current piece
        # The record being parsed: its element, depth, nodes, reason to refuse it.
        self.record: Any = None
        self.depth = 0
        self.nodes = 0
        self.over: str | None = None
        self.record_lo = 0  # it started before this many bytes were fed...
        self.record_hi = 0  # ...and after this many
        # The window: rows (row index, values), refused records and, until a schema is
        # inferred from them, the first window's record elements (row index, element).
        self.rows: list[tuple[int, dict[str, Any]]] = []
        self.bad: list[Bad] = []
        self.held: list[tuple[int, Any]] = []
        self.window_fed = 0

    # ------------------------------------------------------------------ events
    def handle(self, events: Any) -> Iterator[Chunk]:
        """Handle parser events; yield a chunk for each full window."""
        max_depth, max_nodes = self.limits.max_depth, self.limits.max_record_nodes
        max_attrs = self.limits.max_attributes
        for event, elem in events:
            if self.record is None:
                if event == "start":
                    self.rooted = True
                    self.stack.append(local(elem.tag))
                    if self.stack == self.steps:
                        self._start_record(elem)
                else:
                    self.stack.pop()
                    _drop(elem)
            elif event == "start":  # inside the record: count, and check the bounds
                self.depth += 1
                attrs = len(elem.attrib)
                self.nodes += 1 + attrs
                if self.over is None and (
                    self.depth > max_depth or self.nodes > max_nodes or attrs > max_attrs
                ):
                    self._refuse_bound(attrs)
            elif self.depth:
                self.depth -= 1
                if self.over is not None:
                    _drop(elem)
            else:
                yield from self._end_record(elem)
        if self.record is not None and self.over is None:
            spanned = self.fed_before - self.record_lo
            if spanned > self.limits.max_record_bytes:
                self._refuse(f"spans more than max_record_bytes={self.limits.max_record_bytes}")

    def _start_record(self, elem: Any) -> None:
        self.stack.pop()
        self.record = elem
        self.depth = 0
        attrs = len(elem.attrib)
        self.nodes = 1 + attrs
        self.over = None
        if attrs > self.limits.max_attributes:
            self._refuse_bound(attrs)
        self.record_hi = self.fed_before
        self.record_lo = self.fed
        if not self.rows and not self.bad and not self.held:
            self.window_fed = self.fed_before

    def _refuse_bound(self, attrs: int) -> None:
        limits = self.limits
        if attrs > limits.max_attributes:
            self._refuse(
                f"has an element with more than max_attributes={limits.max_attributes} attributes"
            )
        elif self.depth > limits.max_depth:
            self._refuse(f"nests deeper than max_depth={limits.max_depth} levels")
        else:
            limit = limits.max_record_nodes
            self._refuse(f"holds more than max_record_nodes={limit} elements and attributes")

    def _refuse(self, why: str) -> None:
        """Refuse the open record and drop its ended children: memory stays bounded."""
        self.over = why
        record = self.record
        if len(record) > 1:  # the last child may still be open: keep it
            del record[:-1]

    def _end_record(self, elem: Any) -> Iterator[Chunk]:
        index = self.index
        self.index += 1
        self.record = None
        if index >= self.start and self._take(elem, index):
            parent = elem.getparent()  # held, whole, until the schema is inferred
            if parent is not None:
                parent.remove(elem)
        else:
            _drop(elem)
        if self.rows or self.bad or self.held:
            n = len(self.rows) + len(self.bad) + len(self.held)
            if n >= self.batch_rows or self.fed - self.window_fed >= self.limits.max_window_bytes:
                yield from self.flush()

    def _take(self, elem: Any, index: int) -> bool:
        """Read one record into the window; ``True`` when its element is to be held."""
        if self.over is None and self.fed - self.record_hi > self.limits.max_record_bytes:
            if len(_xml_bytes(elem)) > self.limits.max_record_bytes:
                self.over = f"is larger than max_record_bytes={self.limits.max_record_bytes}"
        if self.over is not None:
            self.bad.append(Bad(index, f"XML record {index} {self.over}; it is not read"))
            return False
        if self.plan is None:
            self.held.append((index, elem))
            return True
        try:
            self.rows.append((index, self.plan.record(elem)))
        except Refused as exc:
            self.bad.append(Bad(index, f"XML record {index}: {exc}", _xml_bytes(elem)))
        return False

    # ------------------------------------------------------------------ windows
    def flush(self) -> Iterator[Chunk]:
        """The window so far as a chunk (rows cast to the schema, refused records)."""
        if self.held:
            yield from self._infer()
        rows, bad = self.rows, self.bad
        self.rows, self.bad = [], []
        if not rows and not bad:
            return
        next_row = max([i for i, _ in rows[-1:]] + [b.row for b in bad]) + 1
        offs = np.asarray([i for i, _ in rows], dtype=np.int64)
        good: pa.RecordBatch | None = None
        if rows and self.text is not None:
            good = typed_batch([v for _, v in rows], self.text)
            if self.schema is not None:
                good, offs, cast_bad = cast_rows(good, self.schema, 0, offs)
                bad += cast_bad
        bad.sort(key=lambda b: b.row)
        yield Chunk(good, offs, next_row, None, bad)

    def _infer(self) -> Iterator[Chunk]:
        """The schema from the held first window, then its records read by it."""
        held, self.held = self.held, []
        shape = Shape()
        for _, elem in held:
            shape.add_fields(elem)
        fields = shape.count()
        if fields > self.limits.max_fields:
            first = min([i for i, _ in held] + [b.row for b in self.bad])
            msg = (
                f"XML records at {self.where} hold {fields} distinct fields, more than "
                f"max_fields={self.limits.max_fields}; the rest of the file is not read "
                "(pass a schema naming the fields to read)"
            )
            self.bad = []
            yield Chunk(None, np.zeros(0, np.int64), first, bad=[Bad(first, msg)])
            raise StopReading
        self.text = shape.schema()
        self.plan = Plan(list(self.text), strict=True, where=self.where)
        logger.warning(
            "file source: `%s` XML schema inferred from its first %d records (pass a "
            "contract or an Arrow schema to fix it): %s",
            self.name,
            len(held),
            self.text.to_string(show_schema_metadata=False).replace("\n", "; "),
        )
        for index, elem in held:
            try:
                self.rows.append((index, self.plan.record(elem)))
            except Refused as exc:
                self.bad.append(Bad(index, f"XML record {index}: {exc}", _xml_bytes(elem)))
        self.rows.sort(key=lambda r: r[0])

    def broken(self, exc: Any) -> Iterator[Chunk]:
        """The window so far, then one DLQ row for the rest of a malformed file."""
        if self.record is not None:
            where = f"in record {self.index}"
        elif self.index:
            where = f"after record {self.index - 1}"
        else:
            where = "before the first record"
        yield from self.flush()
        at = max(self.index, self.start)
        msg = (
            f"malformed XML {where} (line {exc.lineno}): {exc.msg}; the rest of the file "
            "is not read"
        )
        yield Chunk(None, np.zeros(0, np.int64), at, bad=[Bad(at, msg)])

    def refused_file(self, why: str) -> Chunk:
        """One DLQ row for a file that is not parsed at all."""
        at = self.start
        return Chunk(None, np.zeros(0, np.int64), at, bad=[Bad(at, why)])


class StopReading(Exception):  # noqa: N818 - control flow inside read_xml only
    """The rest of the file is not read (a DLQ row says why)."""


def _xml_bytes(elem: Any) -> bytes:
    etree = require("lxml.etree", extra="files")
    text: bytes = etree.tostring(elem)
    return text
