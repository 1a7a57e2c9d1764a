"""Protobuf element converters: one node per proto type, to Arrow arrays or Python values.

Private to :mod:`thalweg_bytewax.codecs._proto_arrow`, which compiles plans over them.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

# The facade's logger name, so log configuration and filters keep working.
logger = logging.getLogger("thalweg_bytewax.codecs._proto_arrow")


_FD = FieldDescriptor


_SCALARS: dict[int, pa.DataType] = {
    _FD.TYPE_DOUBLE: pa.float64(),
    _FD.TYPE_FLOAT: pa.float32(),
    _FD.TYPE_INT64: pa.int64(),
    _FD.TYPE_SINT64: pa.int64(),
    _FD.TYPE_SFIXED64: pa.int64(),
    _FD.TYPE_UINT64: pa.uint64(),
    _FD.TYPE_FIXED64: pa.uint64(),
    _FD.TYPE_INT32: pa.int32(),
    _FD.TYPE_SINT32: pa.int32(),
    _FD.TYPE_SFIXED32: pa.int32(),
    _FD.TYPE_UINT32: pa.uint32(),
    _FD.TYPE_FIXED32: pa.uint32(),
    _FD.TYPE_BOOL: pa.bool_(),
    _FD.TYPE_STRING: pa.string(),
    _FD.TYPE_BYTES: pa.binary(),
}


_WRAPPERS: dict[str, pa.DataType] = {
    "google.protobuf.DoubleValue": pa.float64(),
    "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(),
    "google.protobuf.UInt64Value": pa.uint64(),
    "google.protobuf.Int32Value": pa.int32(),
    "google.protobuf.UInt32Value": pa.uint32(),
    "google.protobuf.BoolValue": pa.bool_(),
    "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}


TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
DURATION_TYPE = pa.duration("us")
# google.protobuf.Timestamp's documented range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
_TS_MIN_S, _TS_MAX_S = -62_135_596_800, 253_402_300_799
# google.protobuf.Duration's documented range: +-10,000 years.
_DUR_MAX_S = 315_576_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ValueOutOfRange(ValueError):  # noqa: N818 - internal signal, never public
    """A value cannot be represented in its Arrow type (e.g. a Timestamp past 9999)."""


@dataclass
class ProtoStats:
    """Plain counters of one codec (exported by ``observability/``)."""

    decoded: int = 0
    """Payloads decoded into rows."""
    failed: int = 0
    """Payloads that became decode failures."""
    depth_capped: int = 0
    """Non-null sub-messages rendered as JSON text because they sat below ``max_depth``."""
    truncated_nanos: int = 0
    """Timestamps / Durations whose sub-microsecond nanos were dropped."""
    unknown_enums: int = 0
    """Open-enum values whose number the schema does not name (kept as the number)."""

    def add(self, other: ProtoStats) -> None:
        """Add ``other``'s counts: a conversion counts into a scratch and lands once."""
        self.decoded += other.decoded
        self.failed += other.failed
        self.depth_capped += other.depth_capped
        self.truncated_nanos += other.truncated_nanos
        self.unknown_enums += other.unknown_enums


class _Node:
    arrow_type: pa.DataType
    _warned = False

    def _warn_once(self, message: str, *args: object) -> None:
        """Log ``message`` (a ``logging`` format) the first time this field meets it."""
        if not self._warned:
            self._warned = True
            logger.warning(message, *args)

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        return pa.array(values, self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return v


class _Scalar(_Node):
    def __init__(self, arrow_type: pa.DataType) -> None:
        self.arrow_type = arrow_type


class _String(_Scalar):
    """A ``string`` field; upb hands back ``bytes`` when the text is not valid UTF-8."""

    def __init__(self, path: str) -> None:
        super().__init__(pa.string())
        self.path = path

    def value(self, v: Any, stats: ProtoStats) -> Any:
        if type(v) is not str:
            msg = f"string field `{self.path}` is not valid UTF-8"
            raise ValueOutOfRange(msg)
        return v


class _Enum(_Node):
    arrow_type = pa.string()

    def __init__(self, fd: FieldDescriptor, path: str) -> None:
        enum_type = fd.enum_type
        assert enum_type is not None  # set on every enum field
        self.full_name = enum_type.full_name
        self.path = path
        self.names = {v.number: v.name for v in enum_type.values}
        self._numbers = np.array(sorted(self.names), dtype=np.int64)
        self._symbols = pa.array([self.names[n] for n in self._numbers], pa.string())

    def _unknown(self, n: int, stats: ProtoStats) -> None:
        stats.unknown_enums += n
        self._warn_once(
            "protobuf decode found numbers enum `%s` does not name in `%s`; they are "
            'kept as the number\'s text (e.g. "7") and counted in stats.unknown_enums',
            self.full_name,
            self.path,
        )

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        nums = np.fromiter(values, np.int64, len(values))
        pos = np.searchsorted(self._numbers, nums).clip(0, max(len(self._numbers) - 1, 0))
        known = self._numbers[pos] == nums if len(self._numbers) else np.zeros(len(nums), bool)
        if known.all():
            out = self._symbols.take(pa.array(pos))
            if mask is None:
                return out
            return pc.if_else(pa.array(mask), pa.scalar(None, pa.string()), out)
        # Open (proto3) enums may carry numbers the schema does not name: keep the number.
        unknown = ~known if mask is None else ~known & ~mask
        if unknown.any():
            self._unknown(int(np.count_nonzero(unknown)), stats)
        names = self.names
        return pa.array([names.get(v, str(v)) for v in values], pa.string(), mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        name = self.names.get(v)
        if name is None:
            self._unknown(1, stats)
            return str(v)
        return name


class _Wrapper(_Node):
    def __init__(self, arrow_type: pa.DataType, path: str) -> None:
        self.arrow_type = arrow_type
        self.path = path
        # A descriptor set may bring its own proto2 copy of wrappers.proto, whose
        # StringValue upb does not UTF-8-check: check it here, as _String does.
        self._text = arrow_type == pa.string()

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        out = [w.value for w in values]
        if self._text and not set(map(type, out)) <= {str}:
            msg = f"string field `{self.path}` is not valid UTF-8"
            raise ValueOutOfRange(msg)
        return pa.array(out, self.arrow_type, mask=mask)

    def value(self, v: Any, stats: ProtoStats) -> Any:
        out = v.value
        if self._text and type(out) is not str:
            msg = f"string field `{self.path}` is not valid UTF-8"
            raise ValueOutOfRange(msg)
        return out


def _micros(values: list[Any], lo: int, hi: int, what: str, path: str) -> tuple[np.ndarray, int]:
    n = len(values)
    secs = np.fromiter(map(operator.attrgetter("seconds"), values), np.int64, n)
    nanos = np.fromiter(map(operator.attrgetter("nanos"), values), np.int64, n)
    if n:
        bad = (secs.min() < lo) | (secs.max() > hi) | (np.abs(nanos).max() > 999_999_999)
        if what == "Timestamp":
            bad |= bool(nanos.min() < 0)
        else:
            bad |= bool(((secs > 0) & (nanos < 0)).any() or ((secs < 0) & (nanos > 0)).any())
        if bad:
            msg = f"{what} `{path}` out of range"
            raise ValueOutOfRange(msg)
    sub = nanos % 1000
    return secs * 1_000_000 + np.sign(nanos) * (np.abs(nanos) // 1000), int(np.count_nonzero(sub))


def _micros_one(v: Any, lo: int, hi: int, what: str, path: str) -> tuple[int, bool]:
    s: int = v.seconds
    ns: int = v.nanos
    if what == "Timestamp":
        invalid = not 0 <= ns <= 999_999_999  # noqa: PLR2004
    else:  # Duration: |nanos| < 1e9 and never the opposite sign of seconds
        invalid = abs(ns) > 999_999_999 or (s > 0 and ns < 0) or (s < 0 and ns > 0)  # noqa: PLR2004
    if s < lo or s > hi or invalid:
        msg = f"{what} `{path}` seconds={s} nanos={ns} out of range"
        raise ValueOutOfRange(msg)
    return s * 1_000_000 + (ns // 1000 if ns >= 0 else -(-ns // 1000)), bool(ns % 1000)


class _Micros(_Node):
    """Timestamp / Duration: microseconds, sub-microsecond nanos counted and warned."""

    what = ""
    lo = hi = 0

    def __init__(self, path: str) -> None:
        self.path = path

    def _truncated(self, n: int, stats: ProtoStats) -> None:
        if not n:
            return
        stats.truncated_nanos += n
        self._warn_once(
            "protobuf decode truncates sub-microsecond nanos of %s `%s` (Arrow keeps "
            "microseconds); counted in stats.truncated_nanos",
            self.what,
            self.path,
        )

    def micros(self, v: Any, stats: ProtoStats) -> int:
        us, cut = _micros_one(v, self.lo, self.hi, self.what, self.path)
        self._truncated(int(cut), stats)
        return us

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        us, truncated = _micros(values, self.lo, self.hi, self.what, self.path)
        self._truncated(truncated, stats)
        return pa.array(us, self.arrow_type, mask=mask)


class _Timestamp(_Micros):
    arrow_type = TIMESTAMP_TYPE
    what = "Timestamp"
    lo, hi = _TS_MIN_S, _TS_MAX_S

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return _EPOCH + timedelta(microseconds=self.micros(v, stats))


class _Duration(_Micros):
    arrow_type = DURATION_TYPE
    what = "Duration"
    lo, hi = -_DUR_MAX_S, _DUR_MAX_S

    def value(self, v: Any, stats: ProtoStats) -> Any:
        return timedelta(microseconds=self.micros(v, stats))


class _JsonText(_Node):
    """A message rendered as compact JSON text (Struct / Value / ListValue, or capped)."""

    arrow_type = pa.string()

    def __init__(self, full_name: str, path: str, *, capped: bool) -> None:
        self.full_name = full_name
        self.path = path
        self.capped = capped

    def _render(self, v: Any) -> str:
        try:
            return json_format.MessageToJson(
                v,
                preserving_proto_field_name=True,
                indent=None,
                descriptor_pool=v.DESCRIPTOR.file.pool,
            )
        except (json_format.SerializeToJsonError, ValueError) as exc:
            # e.g. a google.protobuf.Value holding NaN / Infinity has no JSON form.
            msg = f"`{self.path}` ({self.full_name}) has no JSON text: {exc}"
            raise ValueOutOfRange(msg) from exc

    def _bite(self, n: int, stats: ProtoStats) -> None:
        if self.capped and n:
            stats.depth_capped += n
            self._warn_once(
                "protobuf decode hit max_depth at `%s` (`%s`): sub-messages below it are "
                "JSON text; raise max_depth to keep them as structs",
                self.path,
                self.full_name,
            )

    def array(self, values: list[Any], mask: np.ndarray | None, stats: ProtoStats) -> pa.Array:
        out: list[str | None]
        if mask is None:
            out = [self._render(v) for v in values]
        else:
            out = [None if m else self._render(v) for v, m in zip(values, mask, strict=True)]
        self._bite(sum(1 for o in out if o is not None), stats)
        return pa.array(out, pa.string())

    def value(self, v: Any, stats: ProtoStats) -> Any:
        self._bite(1, stats)
        return self._render(v)
