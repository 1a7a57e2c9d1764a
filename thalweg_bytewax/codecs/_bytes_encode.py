"""``BytesEncoder``: a binary column as the Kafka value, byte for byte.

Private to :mod:`thalweg_bytewax.codecs`, which re-exports the public names.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from thalweg_bytewax.codecs.base import EncodedValues, EncodeError
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import DEFAULT_PREFIX

__all__ = ["RAW_VALUE", "BytesEncoder"]

RAW_VALUE = f"{DEFAULT_PREFIX}source_value"
"""The raw lane's payload column, what :class:`BytesEncoder` sends by default."""


class BytesEncoder:
    """Pass a binary column through as the Kafka value: no codec, no framing.

    The raw lane's ``_twg_source_value`` column goes back to Kafka byte for byte; a
    null value stays null (a tombstone).

    Args:
        column: The binary (or string) column to send.

    Example:
        >>> import pyarrow as pa
        >>> enc = BytesEncoder()
        >>> batch = pa.record_batch({"_twg_source_value": pa.array([b"a", None])})
        >>> enc.encode_batch(batch, topic="t").values.to_pylist()
        [b'a', None]
    """

    def __init__(self, column: str = RAW_VALUE) -> None:
        if not isinstance(column, str) or not column:
            msg = f"bytes encoder: `column` expected a column name; got {column!r}"
            raise ConfigError(msg)
        self._column = column

    @property
    def name(self) -> str:
        """``bytes``."""
        return "bytes"

    def __repr__(self) -> str:
        return f"BytesEncoder(column={self._column!r})"

    def encode_batch(self, batch: pa.RecordBatch, *, topic: str) -> EncodedValues:  # noqa: ARG002 - the protocol's signature
        """The column as a ``binary`` array (zero-copy for binary and string columns).

        Raises:
            EncodeError: When the column is missing or not binary / string.
        """
        idx = batch.schema.get_field_index(self._column)
        if idx < 0:
            msg = (
                f"bytes encoder: expected column `{self._column}` in the batch; got "
                f"columns {batch.schema.names}; pass `column=` naming the payload column"
            )
            raise EncodeError(msg, column=self._column)
        col = batch.column(idx)
        t = col.type
        if pa.types.is_binary(t) or pa.types.is_null(t):
            return EncodedValues(col if pa.types.is_binary(t) else col.cast(pa.binary()))
        if pa.types.is_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            return EncodedValues(pc.cast(col, pa.binary()))
        msg = (
            f"bytes encoder: column `{self._column}` expected binary or string; got "
            f"`{t}`; encode it with a codec encoder instead"
        )
        raise EncodeError(msg, column=self._column)
