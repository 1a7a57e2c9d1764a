"""JSON payloads to dicts or Arrow batches, against an explicit schema.

The schema is a JSON Schema (dict or path), an Arrow schema, a data contract (its Arrow
schema: schema beats inference), or ``"infer"`` (explicit fallback, logged as a
WARNING: the shape then depends on the first batch). The columnar
path parses a batch straight into Arrow buffers with the package's native reader, which
accepts only what it decodes exactly as the record-at-a-time path (``orjson`` + the same
Arrow types) would and sets every other row aside for that path, which converts it or
names the offending field; a row that is no JSON at all (cut short, invalid UTF-8...) it
rejects itself, with the text ``orjson`` gives. Without the native reader (a build
without a C compiler) the newline-joined payloads go to ``pyarrow.json.read_json`` with
the schema made explicit; a block that fails is bisected to pinpoint the bad rows.

Example:
    >>> codec = JsonCodec(schema={"type": "object", "required": ["id"],
    ...                           "properties": {"id": {"type": "integer"}}})
    >>> res = codec.decode_batch([b'{"id": 1}', b'{"id": "x"}', b'{"id": 3}'])
    >>> res.batch.to_pylist(), [(e.index, e.kind.value) for e in res.errors]
    ([{'id': 1}, {'id': 3}], [(1, 'schema_mismatch')])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import orjson
import pyarrow as pa

from thalweg_bytewax._choices import check_choice
from thalweg_bytewax._deps import log_fallback_once
from thalweg_bytewax.codecs._contract_schema import contract_object_schema
from thalweg_bytewax.codecs._decode_inputs import DecodeInputs
from thalweg_bytewax.codecs._json_arrow import RowScan, _load_shape
from thalweg_bytewax.codecs._json_columnar import ColumnarPaths
from thalweg_bytewax.codecs._json_fast import NATIVE, NativeReader
from thalweg_bytewax.codecs._json_framing import json_bodies, json_body
from thalweg_bytewax.codecs._json_plan import compile_plan, infer_shape, sample_objects
from thalweg_bytewax.codecs._json_schema import JsonShape
from thalweg_bytewax.codecs._json_values import JsonDecodeError, mismatch
from thalweg_bytewax.codecs._payloads import as_binary
from thalweg_bytewax.codecs.base import (
    DecodeFailure,
    DecodeResult,
    Framing,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.errors import ConfigError, FailureKind, SchemaError
from thalweg_bytewax.records import DEFAULT_PREFIX

if TYPE_CHECKING:
    from thalweg_bytewax.contracts import ContractSpec

__all__ = ["INFER", "JsonCodec", "JsonDecodeError", "JsonEngine"]

logger = logging.getLogger(__name__)

JsonEngine = Literal["auto", "native", "pyarrow"]
"""The columnar reader of :class:`JsonCodec`: ``auto``, ``native`` or ``pyarrow``."""
_ENGINES: tuple[JsonEngine, ...] = ("auto", "native", "pyarrow")

INFER = "infer"
"""Pass as ``schema`` to infer the shape from the first batch (a WARNING is logged)."""


class JsonCodec(ColumnarPaths, DecodeInputs):
    """Decode JSON payloads against an explicit schema.

    Args:
        schema: A JSON Schema (a dict, or a path to a ``.json`` file), an Arrow schema,
            a data contract (:class:`~thalweg_bytewax.contracts.ContractSpec`: its
            Arrow schema is used, nothing is inferred), or ``"infer"`` (explicit
            fallback; logs a WARNING).
        framing: ``"none"`` (bare JSON) or ``"confluent"`` (magic byte 0 + 4-byte
            schema id in front; the id is peeled, not looked up).
        metadata_prefix: The reserved metadata column prefix; a top-level key under it
            is a ``reserved_field`` failure.
        object_name: With a contract, the schema object to decode to (default: the
            contract's only object).
        engine: The columnar reader: ``"auto"`` (the native reader when the package
            was built with it, else ``pyarrow.json``), ``"native"`` (required) or
            ``"pyarrow"``. All of them decode every payload alike.

    Raises:
        ConfigError: On an unknown framing, an unreadable schema file, or
            ``object_name`` without a contract.
        ContractError: When ``object_name`` is not in the contract, or is omitted for
            a contract with several objects.
        SchemaError: On a JSON Schema construct with no faithful Arrow type.
    """

    def __init__(
        self,
        schema: Mapping[str, Any] | pa.Schema | ContractSpec | str | os.PathLike[str],
        *,
        framing: Framing | str = Framing.NONE,
        metadata_prefix: str = DEFAULT_PREFIX,
        object_name: str | None = None,
        engine: JsonEngine = "auto",
    ) -> None:
        check_choice(engine, _ENGINES, where="json codec", argument="engine")
        if engine == "native" and not NATIVE:
            msg = (
                "json codec: the native reader is not built (the package was installed "
                "without a C compiler); reinstall with one, or use engine='auto'"
            )
            raise ConfigError(msg)
        if engine == "auto" and not NATIVE:
            log_fallback_once(
                logger,
                logging.WARNING,
                "json codec: the native reader is not built (no C compiler at install); "
                "decoding through pyarrow.json, about 3x slower",
            )
        self._engine = engine if engine != "auto" else ("native" if NATIVE else "pyarrow")
        self._reader: NativeReader | None = None
        self._framing = self._framing_of(framing)
        self._prefix = metadata_prefix
        self._scan = RowScan(metadata_prefix)
        self._shape: JsonShape | None = None
        self._reserved: list[str] = []  # schema fields under the prefix (none until known)
        # Schema beats inference: a data contract's Arrow schema is used as given.
        schema = contract_object_schema(schema, object_name, "json codec")
        if isinstance(schema, str) and schema == INFER:
            logger.warning(
                "json codec: schema inferred from the first batch; its shape may drift "
                "between runs (pass a JSON Schema or an Arrow schema)"
            )
        else:
            self._set_shape(_load_shape(schema))

    def _set_shape(self, shape: JsonShape) -> None:
        self._shape = shape
        plan = compile_plan(shape, native=self._engine == "native", prefix=self._prefix)
        self._convert = plan.convert
        self._wire, self._cast, self._parsed = plan.wire, plan.cast, plan.parsed
        self._parse = plan.parse
        self._reserved = plan.reserved
        self._reader = plan.reader
        self._columnar = plan.columnar

    @property
    def name(self) -> str:
        """``json``."""
        return "json"

    @property
    def concurrent_batches(self) -> bool:
        """Whether batches may be decoded on several threads at once.

        True with the native reader, which parses without the GIL, and a schema that
        is given rather than inferred (inference sets the shape at the first batch).
        """
        return self._reader is not None and self._shape is not None

    @property
    def arrow_schema(self) -> pa.Schema:
        """The exact Arrow schema ``decode_batch`` produces.

        Raises:
            SchemaError: With ``schema="infer"`` before the first batch.
        """
        if self._shape is None:
            msg = "json codec: schema is inferred from the first batch; decode one first"
            raise SchemaError(msg)
        return self._shape.schema

    # ------------------------------------------------------------------ per value
    def _body(self, payload: bytes | None) -> bytes:
        return json_body(payload, self._framing)

    def _doc(self, body: bytes) -> dict[str, Any]:
        """One top-level object; anything else (`null`, `[1]`, `5`) is a mismatch."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            msg = f"json payload is malformed: {exc}"
            raise JsonDecodeError(msg, FailureKind.MALFORMED) from exc
        if type(doc) is not dict:
            err = mismatch("$", "an object", doc)
            raise err
        bad = self._reserved or [k for k in doc if k.startswith(self._prefix)]
        if bad:
            msg = (
                f"json field `{bad[0]}` is under the reserved metadata prefix "
                f"`{self._prefix}`; rename it or set `metadata_prefix`"
            )
            raise JsonDecodeError(msg, FailureKind.RESERVED_FIELD)
        return doc

    def decode_value(
        self, payload: bytes, *, headers: Sequence[tuple[str, bytes | None]] | None = None
    ) -> dict[str, Any]:
        """Decode one payload to a dict equal to its ``decode_batch`` row.

        Raises:
            JsonDecodeError: With the failure kind and a message naming the field.
            ConfigError: ``payload`` is not bytes, str or ``None``, or ``headers`` has
                the wrong shape.
        """
        self._check_value_args(payload, headers, text=True)
        doc = self._doc(self._body(payload))
        if self._shape is None:
            self._infer([doc])
        return self._convert(doc)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ columnar
    def decode_batch(
        self, payloads: PayloadsInput, *, headers: HeadersInput = None
    ) -> DecodeResult:
        """Decode payloads to one batch plus per-row failures; never raises for bad data.

        Framing and null checks are columnar. The native reader parses the rest in one
        pass and sets aside every row it cannot decode exactly (a type mismatch, a
        repeated key, an escaped key...); those rows, and rows whose required fields are
        null or missing, are decided in Python, where ``orjson`` decides as
        ``decode_value`` does.

        Raises:
            ConfigError: ``payloads`` is not a binary Arrow array or a sequence of bytes,
                or ``headers`` has the wrong shape.
        """
        payloads = self._checked_batch_args(payloads, headers)
        arr = as_binary(payloads)
        body, good_np, errors = json_bodies(arr, self._framing)
        if self._shape is None:
            sample = body.filter(pa.array(good_np)).slice(0, 1000)
            self._infer(sample_objects(sample.to_pylist()))
        if self._reader is not None:
            rows = np.flatnonzero(good_np)
            bodies = body if len(rows) == len(body) else body.filter(pa.array(good_np))
            if self._reserved:
                errors += [DecodeFailure(int(i), *self._failure(b"{}")) for i in rows]
                rows = rows[:0]
            batches, failed = self._native_blocks(rows, bodies)
        else:
            batches, failed = self._pyarrow_batch(body, good_np, errors)
        errors.extend(failed)
        errors.sort(key=lambda e: e.index)
        if not batches:
            return DecodeResult(self._empty(), errors)
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        return DecodeResult(batch, errors)

    def _empty(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([], schema=self.arrow_schema)

    def _infer(self, docs: list[dict[str, Any]]) -> None:
        self._set_shape(infer_shape(docs))
