"""Private: the schema of a Parquet lane over time — lossless joins, evolution, read-back.

A lane's files are written over months, and the batches a flow writes drift: a field
appears, a type widens. The lane stays one table by these rules (ARCHITECTURE §6, the
same rules as the table sinks, in Arrow terms since a lane keeps Arrow types):

* a new column is added, nullable (rows written before it existed read it as NULL);
* a column whose lane type holds the batch's values losslessly takes them (the batch
  is cast, :func:`conform`);
* a column the batch needs wider is widened only with ``allow_widening=True`` and only
  where every value keeps its exact value (:func:`widens`);
* anything else, and a non-nullable column the batch lacks, is refused naming the
  column, its old and its new type (:class:`Refusal`).

The reader (:func:`unify_file_schemas`) joins the schemas of every file of a lane by the
same relation, so a lane reads back as one table whatever schema each file carries,
with NULL only for columns a file does not hold, or raises naming the files.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from thalweg_bytewax.errors import SchemaError

if TYPE_CHECKING:
    import pyarrow.dataset as ds

__all__ = [
    "Evolution",
    "Refusal",
    "conform",
    "evolve",
    "file_schemas",
    "join_types",
    "unify_file_schemas",
    "widens",
]

logger = logging.getLogger(__name__)

# (signed, bits) of each integer type.
_INTS: dict[pa.DataType, tuple[bool, int]] = {
    pa.int8(): (True, 8),
    pa.int16(): (True, 16),
    pa.int32(): (True, 32),
    pa.int64(): (True, 64),
    pa.uint8(): (False, 8),
    pa.uint16(): (False, 16),
    pa.uint32(): (False, 32),
    pa.uint64(): (False, 64),
}
# Decimal digits every value of an integer type needs left of the point.
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}
# Significand bits of each float: the integers it holds exactly.
_FLOAT_BITS = {pa.float16(): 11, pa.float32(): 24, pa.float64(): 53}
_FLOAT_ORDER = (pa.float16(), pa.float32(), pa.float64())
_LARGER = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
# Footers are read in parallel (pyarrow releases the GIL): on an object store each is a
# round trip. Measured locally on 2,000 small files: 85 us per footer serially, and the
# scan reuses the footers read here (docs/connectors/parquet.md "Schema evolution").
_INSPECT_THREADS = 8
_INSPECT_PARALLEL_FROM = 16


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of ``old`` is exactly a value of ``new`` (a lossless widening).

    Integers to integers of more range, and to floats or decimals that hold every
    value; ``float16`` → ``float32`` → ``float64``; decimals whose scale and integer
    digits do not shrink; ``string``/``binary`` to their large variants. Reflexive.
    """
    if old.equals(new):
        return True
    if old in _INTS:
        signed, bits = _INTS[old]
        if new in _INTS:
            new_signed, new_bits = _INTS[new]
            if signed:
                return new_signed and new_bits >= bits
            return new_bits >= bits if not new_signed else new_bits > bits
        if new in _FLOAT_BITS:
            return _FLOAT_BITS[new] >= bits - (1 if signed else 0)
        if pa.types.is_decimal(new):
            digits = _INT_DIGITS[bits] + (1 if not signed and bits == 64 else 0)  # noqa: PLR2004
            return bool(new.precision - new.scale >= digits)
        return False
    if old in _FLOAT_BITS and new in _FLOAT_BITS:
        return _FLOAT_ORDER.index(old) <= _FLOAT_ORDER.index(new)
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(
            new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
        )
    return bool(_LARGER.get(old) == new)


def join_types(old: pa.DataType, new: pa.DataType) -> tuple[pa.DataType, bool] | None:
    """The type a lane column of type ``old`` needs to also hold ``new`` values.

    Returns:
        ``(type, widened)``: ``old`` itself when ``new`` fits it (the batch is cast;
        an all-NULL ``null`` column fits anything, and a ``null`` column takes the
        first real type without a widening);
        ``new`` (``widened`` true) when ``old`` widens losslessly to it; for structs,
        lists and maps the join of their children (struct fields are joined by name,
        a field one side lacks becomes nullable). ``None`` when no type holds both.
    """
    if old.equals(new) or pa.types.is_null(new):
        return old, False
    if pa.types.is_null(old):  # only NULLs so far: the first real type is no widening
        return new, False
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return _join_struct(old, new)
    for is_kind, make in (
        (pa.types.is_list, pa.list_),
        (pa.types.is_large_list, pa.large_list),
    ):
        if is_kind(old) and is_kind(new):
            joined = _join_field(old.value_field, new.value_field)
            return None if joined is None else (make(joined[0]), joined[1])
    if pa.types.is_map(old) and pa.types.is_map(new):
        if not old.key_type.equals(new.key_type):
            return None
        item = _join_field(old.item_field, new.item_field)
        return None if item is None else (pa.map_(old.key_type, item[0]), item[1])
    if widens(new, old):
        return old, False
    if widens(old, new):
        return new, True
    return None


def _join_field(old: pa.Field, new: pa.Field) -> tuple[pa.Field, bool] | None:
    joined = join_types(old.type, new.type)
    if joined is None:
        return None
    t, widened = joined
    return pa.field(old.name, t, old.nullable or new.nullable, old.metadata), widened


def _join_struct(old: pa.StructType, new: pa.StructType) -> tuple[pa.DataType, bool] | None:
    by_name = {f.name: f for f in reversed(list(new))}  # the first of a duplicated name
    fields: list[pa.Field] = []
    widened = False
    for f in old:
        other = by_name.get(f.name)
        if other is None:
            fields.append(f.with_nullable(True))
            continue
        joined = _join_field(f, other)
        if joined is None:
            return None
        fields.append(joined[0])
        widened = widened or joined[1]
    known = {f.name for f in old}
    fields.extend(f.with_nullable(True) for f in new if f.name not in known)
    return pa.struct(fields), widened


@dataclass(frozen=True)
class Refusal:
    """A column change a lane will not make.

    Attributes:
        name: The column.
        old: Its type in the lane.
        new: Its type in the batch, ``None`` when the batch lacks the column.
        widening: Whether the change is a lossless widening (``allow_widening=True``
            admits it).
    """

    name: str
    old: pa.DataType
    new: pa.DataType | None
    widening: bool = False

    def message(self, batch: pa.Schema) -> str:
        """The refusal in words: column, old and new type, and the remedy."""
        if self.new is None:
            return (
                f"column `{self.name}` is not nullable (`{self.old}` not null) and absent "
                f"from the batch; expected the batch to carry it; got schema "
                f"{list(batch.names)!r}; add the column upstream, or write to a new lane"
            )
        if self.widening:
            return (
                f"column `{self.name}` is `{self.old}`; expected the batch to fit it; got "
                f"`{self.new}`; the change is a lossless widening: set allow_widening=True "
                f"to widen it"
            )
        return (
            f"column `{self.name}` is `{self.old}`; expected a type it holds losslessly; "
            f"got `{self.new}`; cast the column upstream, or write to a new column or lane"
        )


@dataclass(frozen=True)
class Evolution:
    """What a lane's schema becomes to take a batch's.

    Attributes:
        schema: The lane schema with every non-refused change applied.
        refusals: The refused changes (nothing may be written when there are any).
        changed: Whether ``schema`` differs from the lane's (types or nullability).
    """

    schema: pa.Schema
    refusals: tuple[Refusal, ...]
    changed: bool

    def refused_message(self, batch: pa.Schema) -> str:
        """Every refusal in one message (empty when there is none)."""
        texts = [r.message(batch) for r in self.refusals]
        if len(texts) <= 1:
            return "".join(texts)
        return f"{len(texts)} changes refused: " + "; ".join(texts)


def evolve(
    lane: pa.Schema | None,
    batch: pa.Schema,
    *,
    allow_widening: bool,
    missing: Literal["refuse", "relax"] = "refuse",
) -> Evolution:
    """Plan the lane schema that holds both ``lane``'s files and ``batch``.

    Pure. Every column is checked before the result is returned, so all refusals are
    known before anything is written.

    Args:
        lane: The lane's schema, ``None`` for a lane without one yet.
        batch: The schema of the batch about to be written.
        allow_widening: Widen columns losslessly instead of refusing.
        missing: A non-nullable lane column the batch lacks: ``"refuse"`` it, or
            ``"relax"`` it to nullable (when joining files that already exist).

    Returns:
        The evolved schema, the refusals, and whether anything changed.
    """
    if lane is None:
        return Evolution(batch, (), True)
    by_name = {f.name: f for f in reversed(list(batch))}
    fields: list[pa.Field] = []
    refusals: list[Refusal] = []
    for old in lane:
        new = by_name.get(old.name)
        if new is None:
            if not old.nullable and missing == "refuse":
                refusals.append(Refusal(old.name, old.type, None))
            fields.append(old.with_nullable(True))
            continue
        joined = join_types(old.type, new.type)
        if joined is None:
            refusals.append(Refusal(old.name, old.type, new.type))
            fields.append(old)
        elif joined[1] and not allow_widening:
            refusals.append(Refusal(old.name, old.type, new.type, widening=True))
            fields.append(old)
        else:
            fields.append(pa.field(old.name, joined[0], old.nullable or new.nullable, old.metadata))
    known = set(lane.names)
    for new in batch:
        if new.name not in known:
            known.add(new.name)
            fields.append(new.with_nullable(True))
    schema = pa.schema(fields, metadata=lane.metadata)
    return Evolution(schema, tuple(refusals), not schema.equals(lane))


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns: cast losslessly, NULL where absent.

    ``schema`` comes from :func:`evolve` over the batch's schema, so every cast is a
    lossless widening. A batch that already has the schema is returned as it is.
    """
    if batch.schema.equals(schema):
        return batch
    columns: list[pa.Array] = []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        if i < 0:
            columns.append(pa.nulls(batch.num_rows, f.type))
            continue
        column = batch.column(i)
        columns.append(column if column.type.equals(f.type) else column.cast(f.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def file_schemas(fragments: Sequence[ds.FileFragment]) -> list[tuple[str, pa.Schema]]:
    """``(path, schema)`` of each file fragment, from its footer, in order.

    The fragments keep the footers they read, so a scan over them afterwards does not
    read them again.
    """
    if len(fragments) < _INSPECT_PARALLEL_FROM:
        return [(f.path, f.physical_schema) for f in fragments]
    with ThreadPoolExecutor(min(_INSPECT_THREADS, len(fragments))) as pool:
        schemas = list(pool.map(lambda f: f.physical_schema, fragments))
    return [(f.path, s) for f, s in zip(fragments, schemas, strict=True)]


def unify_file_schemas(lane: str, files: Sequence[tuple[str, pa.Schema]]) -> pa.Schema | None:
    """The one schema every file of a lane reads as, or ``None`` without files.

    Columns in order of first appearance; each column's type is the lossless join of
    its types in the files (:func:`join_types`), nullable where any file lacks it.

    Raises:
        SchemaError: Two files hold a column in types no lossless type holds, naming
            the lane, the column, both files and both types.
    """
    if not files:
        return None
    unified = files[0][1]
    origin = dict.fromkeys(unified.names, files[0][0])
    for path, schema in files[1:]:
        if schema.equals(unified):
            continue
        step = evolve(unified, schema, allow_widening=True, missing="relax")
        if step.refusals:
            bad = step.refusals[0]
            msg = (
                f"lane `{lane}`: column `{bad.name}` is `{bad.old}` in `{origin[bad.name]}` "
                f"and `{bad.new}` in `{path}`; expected types one column holds losslessly; "
                f"got two no type holds. Files of another schema were written into this "
                f"lane (by an earlier version of the sink, or another writer): move one "
                f"set to another lane, or rewrite it with a common type"
            )
            raise SchemaError(msg)
        for f in step.schema:
            if f.name not in origin or not f.type.equals(unified.field(f.name).type):
                origin[f.name] = path
        unified = step.schema
    return unified
