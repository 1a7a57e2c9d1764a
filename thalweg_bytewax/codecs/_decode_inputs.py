"""The argument checks the Avro, Protobuf and JSON codecs start with, in one place.

Each codec takes a ``framing`` option and checks the ``payload(s)`` and ``headers`` a
caller passes to ``decode_value`` and ``decode_batch`` before it reads a byte; the
messages name the codec (:attr:`~thalweg_bytewax.codecs.base.Codec.name`).
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from thalweg_bytewax.codecs.base import (
    Framing,
    check_headers,
    check_payload,
    check_payloads,
    parse_framing,
)

__all__ = ["DecodeInputs"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class DecodeInputs:
    """The ``framing`` option and the argument checks of ``decode_value`` / ``decode_batch``."""

    def _framing_of(self: _Named, framing: Framing | str) -> Framing:
        """``framing`` as a :class:`Framing`, else a ``ConfigError`` naming this codec."""
        return parse_framing(framing, self.name)

    def _check_value_args(
        self: _Named, payload: object, headers: object, *, text: bool = False
    ) -> None:
        """A ``ConfigError`` unless ``payload`` and its ``headers`` have the types taken.

        ``payload``: bytes-like (or text, with ``text``) or ``None``; ``headers``: ``None``
        or one row of ``(str, bytes | None)`` pairs.
        """
        check_payload(payload, self.name, text=text)
        check_headers([headers], self.name)

    def _checked_batch_args(
        self: _Named, payloads: object, headers: object
    ) -> pa.Array | pa.ChunkedArray:
        """``payloads`` as a binary Arrow array, once they and ``headers`` are checked.

        Raises:
            ConfigError: When ``payloads`` or ``headers`` (one row a payload, or ``None``)
                has another shape.
        """
        checked = check_payloads(payloads, self.name)
        check_headers(headers, self.name)
        return checked
