"""Protobuf payloads to dicts or Arrow batches, without generated classes.

Message types come from a FileDescriptorSet (``.pb`` path, bytes or message) or from a
Confluent-compatible schema registry (with references), and are built in a private
:class:`~google.protobuf.descriptor_pool.DescriptorPool`. Payloads are parsed by the
upb-backed classes of :func:`google.protobuf.message_factory.GetMessageClass`; the
Arrow columns are then built field by field over the parsed messages (see
:mod:`thalweg_bytewax.codecs._proto_arrow` for the type mapping).

Example:
    >>> from thalweg_bytewax.dev.samples import encode_order_proto
    >>> from thalweg_bytewax.dev.samples import order_descriptor_set
    >>> from thalweg_bytewax.dev.samples import sample_orders
    >>> codec = ProtobufCodec(descriptor_set=order_descriptor_set(),
    ...                       message_type="thalweg.samples.Order")
    >>> result = codec.decode_batch([encode_order_proto(o) for o in sample_orders(3)])
    >>> result.batch.num_rows, result.errors
    (3, [])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import repeat
from typing import Any, cast

import pyarrow as pa
from google.protobuf.descriptor import FileDescriptor

from thalweg_bytewax.codecs._decode_inputs import DecodeInputs
from thalweg_bytewax.codecs._gc import gc_paused
from thalweg_bytewax.codecs._proto_arrow import (
    ProtoStats,
    ValueOutOfRange,
)
from thalweg_bytewax.codecs._proto_batch import pinpoint
from thalweg_bytewax.codecs._proto_pool import (
    DescriptorSetInput,
    RegistryDescriptors,
    SchemaLookupError,
    load_descriptor_set,
    message_in_set,
)
from thalweg_bytewax.codecs._proto_resolve import (
    ProtobufDecodeError,
    _as_error,
    _as_pylist,
    _header_rows,
    _reparse,
    _Resolved,
)
from thalweg_bytewax.codecs._proto_writers import WriterTypes
from thalweg_bytewax.codecs.base import (
    DecodeFailure,
    DecodeResult,
    Framing,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.codecs.framing import FramingError
from thalweg_bytewax.errors import ConfigError, SchemaError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "ProtoStats",
    "ProtobufCodec",
    "ProtobufDecodeError",
    "SchemaLookupError",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_DEPTH = 32
"""Default message nesting depth kept as Arrow structs; deeper sub-messages are JSON text.

Well above realistic schema depth (learnings §3): only recursive types reach it."""


class ProtobufCodec(WriterTypes, DecodeInputs):
    """Decode Protobuf payloads with descriptors from a descriptor set or a registry.

    Args:
        registry: A schema source: a ``SchemaRegistryClient``, a registry URL
            (``mock://...`` included), a local schema directory or a
            :class:`~thalweg_bytewax.registry.SchemaSource`. Writer types come from each
            payload's schema id (or GUID header) and message indexes; references are
            resolved.
        descriptor_set: A FileDescriptorSet (``.pb`` path, bytes or message), e.g. from
            ``protoc --include_imports --descriptor_set_out``.
        message_type: Fully-qualified message name to decode. With a descriptor set it
            defaults to the first message of the last file; with a registry, to the type
            of the first payload seen. Payloads whose framing names another type are
            ``schema_mismatch`` failures.
        framing: ``"confluent"`` (magic 0 + id + message indexes, or a schema-GUID
            header) or ``"none"`` (bare bodies; descriptor set only). With a descriptor
            set the schema id is not checked, the message indexes are.
        max_depth: Message nesting levels kept as Arrow structs. A sub-message deeper
            than this becomes JSON text; start-up logs a WARNING naming every such field
            and :attr:`stats` counts each occurrence.
        metadata_prefix: The reserved metadata column prefix; a top-level field under it
            is a ``reserved_field`` failure.

    Raises:
        ConfigError: On a missing or contradictory source, or an unknown message type.
        SchemaError: When a descriptor set does not build.
    """

    def __init__(
        self,
        registry: Any = None,
        descriptor_set: DescriptorSetInput | None = None,
        *,
        message_type: str | None = None,
        framing: Framing | str = Framing.CONFLUENT,
        max_depth: int = DEFAULT_MAX_DEPTH,
        metadata_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if (registry is None) == (descriptor_set is None):
            msg = "protobuf codec: expected exactly one of `registry` and `descriptor_set`"
            raise ConfigError(msg)
        self._framing = self._framing_of(framing)
        if max_depth < 1:
            msg = f"protobuf codec: expected max_depth >= 1; got {max_depth!r}"
            raise ConfigError(msg)
        self._max_depth = max_depth
        self._prefix = metadata_prefix
        self._message_type = message_type
        self.stats = ProtoStats()
        """Counters: decoded, failed, depth_capped, truncated_nanos, unknown_enums."""
        self._by_ref: dict[tuple[int | str, tuple[int, ...]], _Resolved] = {}
        self._target: _Resolved | None = None
        self._target_key: int | str | None = None
        self._registry: RegistryDescriptors | None = None
        self._misses: dict[int | str, SchemaLookupError] | None = None
        self._root_file: FileDescriptor | None = None
        if registry is not None:
            if self._framing is Framing.NONE:
                msg = "protobuf codec: framing `none` needs `descriptor_set`, not a registry"
                raise ConfigError(msg)
            self._registry = RegistryDescriptors(registry)
        elif descriptor_set is not None:  # always: exactly one of the two, checked above
            self._init_descriptor_set(descriptor_set)

    def _init_descriptor_set(self, source: DescriptorSetInput) -> None:
        desc = message_in_set(load_descriptor_set(source), self._message_type, "protobuf codec")
        self._root_file = desc.file
        self._target = _Resolved(desc, self._max_depth, self._prefix, "descriptor set")

    # ------------------------------------------------------------------ protocol
    @property
    def name(self) -> str:
        """``protobuf``."""
        return "protobuf"

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the decoded message type.

        Raises:
            SchemaError: With a registry and no payload decoded yet.
        """
        if self._target is None:
            msg = (
                "protobuf codec: the message type is resolved from the first payload; "
                "decode one first"
            )
            raise SchemaError(msg)
        return self._target.plan.schema

    @property
    def message_type(self) -> str | None:
        """The fully-qualified name of the decoded message type, once known."""
        return self._target.desc.full_name if self._target else self._message_type

    def decode_value(
        self, payload: bytes, *, headers: Sequence[tuple[str, bytes | None]] | None = None
    ) -> dict[str, Any]:
        """Decode one payload to a dict equal to its ``decode_batch`` row.

        Maps are dicts, Timestamps aware ``datetime`` (UTC), Durations ``timedelta``.

        Raises:
            ProtobufDecodeError: With the failure kind and a message naming the cause.
            ConfigError: ``payload`` or ``headers`` has the wrong type.
        """
        self._check_value_args(payload, headers)
        try:
            res, body = self._resolve(payload, headers)
            msg_obj = self._parse(res, body)
            target = self._target
            assert target is not None  # noqa: S101 - resolving sets it
            if res is not target:
                msg_obj = _reparse(target, msg_obj)
            counted = ProtoStats()  # lands only if the whole row converts
            out = target.plan.to_dict(msg_obj, counted)
        except ValueOutOfRange as exc:
            self.stats.failed += 1
            msg = f"protobuf payload: {exc}"
            raise ProtobufDecodeError(msg) from exc
        except (ProtobufDecodeError, FramingError, SchemaLookupError) as exc:
            self.stats.failed += 1
            raise _as_error(exc) from exc
        self.stats.add(counted)
        self.stats.decoded += 1
        return out

    def decode_batch(
        self, payloads: PayloadsInput, *, headers: HeadersInput = None
    ) -> DecodeResult:
        """Decode payloads to one batch of the target type plus per-row failures.

        Never raises for bad data; a registry outage still raises.

        Raises:
            ConfigError: ``payloads`` is not a binary Arrow array or a sequence of bytes,
                or ``headers`` has the wrong shape.
        """
        payloads = self._checked_batch_args(payloads, headers)
        values = _as_pylist(payloads)
        header_rows = _header_rows(headers, len(values))
        # A schema id the registry does not know is asked once per batch, not once per
        # row (a flood of them must not become a registry round trip each); the next
        # batch asks again, so a schema registered later is found.
        self._misses = {}
        try:
            with gc_paused():
                return self._decode_rows(values, header_rows)
        finally:
            self._misses = None

    # ------------------------------------------------------------------ internals
    def _decode_rows(
        self, values: list[bytes | None], header_rows: list[Any] | None
    ) -> DecodeResult:
        errors: list[DecodeFailure] = []
        fast = None if header_rows else self._parse_uniform(values)
        rows: list[tuple[int, _Resolved, Any]] = []
        if fast is not None:
            target, msgs = fast
            rows = [(i, target, m) for i, m in enumerate(msgs)]
        else:
            parsed = []
            for i, p in enumerate(values):
                try:
                    res, body = self._resolve(p, header_rows[i] if header_rows else None)
                    parsed.append((i, res, self._parse(res, body)))
                except (ProtobufDecodeError, FramingError, SchemaLookupError) as exc:
                    err = _as_error(exc)
                    errors.append(DecodeFailure(i, err.kind, str(err)))
            maybe_target = self._target
            if maybe_target is None:  # every payload failed before the type was known
                self.stats.failed += len(errors)
                return DecodeResult(pa.RecordBatch.from_pylist([]), errors)
            target = maybe_target
            # Rows parsed with an older writer descriptor of the same type are re-read
            # with the target's class: Protobuf evolution is by field number, so exact
            # unless a field changed type incompatibly (checked per row).
            for i, res, m in parsed:
                if res is target:
                    rows.append((i, res, m))
                    continue
                try:
                    rows.append((i, res, _reparse(target, m)))
                except ProtobufDecodeError as exc:
                    errors.append(DecodeFailure(i, exc.kind, str(exc)))
            errors.sort(key=lambda e: e.index)
            msgs = [m for _, _, m in rows]
        try:
            # Counts land in self.stats only when the whole batch converts, so a row
            # is counted once whichever path ends up converting it.
            batch = target.plan.record_batch(msgs, self.stats)
        except (ValueOutOfRange, pa.ArrowException):
            batch, more = pinpoint(target, [(i, m) for i, _, m in rows], self.stats)
            errors.extend(more)
            errors.sort(key=lambda e: e.index)
        self.stats.decoded += batch.num_rows
        self.stats.failed += len(errors)
        return DecodeResult(batch, errors)

    def _parse_uniform(self, values: list[bytes | None]) -> tuple[_Resolved, list[Any]] | None:
        """Parse a batch whose payloads all share the first one's frame, in C loops.

        The Confluent frame (magic, schema id, message-index varints) is a prefix code:
        a payload starting with the first payload's frame bytes peels to the same
        schema reference, so one ``startswith`` per row replaces the per-row peel.
        ``None`` (use the per-row path) on a null, another frame, a type that is not the
        target, or any body that does not parse.
        """
        if not values or values[0] is None or None in values:
            return None
        first = values[0]
        try:
            res, body = self._resolve(first, None)
        except (ProtobufDecodeError, FramingError, SchemaLookupError):
            return None
        if res is not self._target or res.reserved:
            return None
        cut = len(first) - len(body)
        payloads = cast("list[bytes]", values)  # no None: checked above
        try:
            if cut:
                frame = first[:cut]
                if not all(map(bytes.startswith, payloads, repeat(frame))):
                    return None
                payloads = [p[cut:] for p in payloads]
            msgs = list(map(res.cls.FromString, payloads))
        except Exception:  # noqa: BLE001 - non-bytes input or a bad body: per-row path
            return None
        if res.check.needed and not all(map(res.check.ok, msgs)):
            return None
        return res, msgs

    def _parse(self, res: _Resolved, body: bytes) -> Any:
        if res.reserved:
            raise res.reserved_error()
        try:
            out = res.cls.FromString(body)
        except Exception as exc:  # upb raises google.protobuf.message.DecodeError
            msg = f"protobuf body of `{res.desc.full_name}` does not parse: {exc}"
            raise ProtobufDecodeError(msg) from exc
        if res.check.needed:
            res.check.check(out)
        return out
