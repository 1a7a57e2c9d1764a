"""Protobuf message types ready to decode, decode errors and input normalisation.

Private to :mod:`thalweg_bytewax.codecs.protobuf`, which re-exports the public names.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor

from thalweg_bytewax.codecs._proto_arrow import (
    MessagePlan,
    compile_plan,
)
from thalweg_bytewax.codecs.base import (
    FailureKind,
    HeadersInput,
    PayloadsInput,
)
from thalweg_bytewax.codecs.framing import FramingError
from thalweg_bytewax.errors import ConfigError, DecodeError

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.codecs.protobuf")


class ProtobufDecodeError(DecodeError):
    """One Protobuf payload failed to decode; ``kind`` is its :class:`FailureKind`."""

    __module__ = "thalweg_bytewax.codecs.protobuf"

    def __init__(self, message: str, kind: FailureKind = FailureKind.MALFORMED) -> None:
        super().__init__(message, kind)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


class _Resolved:
    """One message type ready to decode: class, plan, reserved-field verdict."""

    def __init__(self, desc: Descriptor, max_depth: int, prefix: str, label: str) -> None:
        self.desc = desc
        self.cls = message_factory.GetMessageClass(desc)
        self.plan: MessagePlan = compile_plan(desc, max_depth=max_depth)
        self.reserved = [f.name for f in desc.fields if f.name.startswith(prefix)]
        if self.plan.capped:
            logger.warning(
                "protobuf codec: `%s` nests deeper than max_depth=%d (recursive types); "
                "these fields decode as JSON text past the cap: %s",
                desc.full_name,
                max_depth,
                ", ".join(self.plan.capped),
            )
        if self.reserved:
            logger.warning(
                "protobuf codec: `%s` (%s) declares fields under the reserved prefix `%s` "
                "(%s); every payload of it is a decode error",
                desc.full_name,
                label,
                prefix,
                ", ".join(self.reserved),
            )
        logger.info(
            "resolved protobuf decode schema `%s` (%s): %s",
            desc.full_name,
            label,
            self.plan.schema.to_string(show_schema_metadata=False).replace("\n", "; "),
        )

    def reserved_error(self) -> ProtobufDecodeError:
        msg = (
            f"protobuf message `{self.desc.full_name}` has field `{self.reserved[0]}` under "
            f"the reserved metadata prefix; rename the field or set `metadata_prefix`"
        )
        return ProtobufDecodeError(msg, FailureKind.RESERVED_FIELD)


def _reparse(target: _Resolved, msg: Any) -> Any:
    return target.cls.FromString(msg.SerializeToString())


def _as_error(exc: Exception) -> ProtobufDecodeError:
    if isinstance(exc, ProtobufDecodeError):
        return exc
    kind = getattr(exc, "kind", FailureKind.MALFORMED)
    text = str(exc)
    if isinstance(exc, FramingError):
        text = f"protobuf framing: {text}"
    return ProtobufDecodeError(text, kind)


def _as_pylist(payloads: PayloadsInput) -> list[bytes | None]:
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    if isinstance(payloads, pa.Array):
        values: list[bytes | None] = payloads.to_pylist()
        return values
    return list(payloads)


def _header_rows(headers: HeadersInput, n: int) -> list[Any] | None:
    if headers is None:
        return None
    rows = headers.to_pylist() if isinstance(headers, pa.Array) else list(headers)
    if len(rows) != n:
        msg = f"protobuf codec: expected {n} header rows (one per payload); got {len(rows)}"
        raise ConfigError(msg)
    out: list[Any] = []
    for r in rows:
        if r is None:
            out.append(None)
        else:
            out.append([(h["key"], h["value"]) if isinstance(h, dict) else tuple(h) for h in r])
    return out
