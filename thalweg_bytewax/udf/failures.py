"""What a WASM function's call reports: why a chunk failed, which rows, and the result.

A call fails with :class:`WasmUdfError` of a :class:`UdfFailure` kind (fuel, memory,
trap, status, ABI); :meth:`~thalweg_bytewax.udf.function.WasmFunction.apply` returns a
:class:`UdfResult`: the values of the rows that succeeded, their indices, and each
failed range of rows as a :class:`RowFailure` with its error.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa

from thalweg_bytewax.errors import ThalwegError

__all__ = ["RowFailure", "UdfFailure", "UdfResult", "WasmUdfError"]


class UdfFailure(StrEnum):
    """Why a call of a WASM function failed. The values are stable."""

    FUEL = "fuel"
    """The call ran out of fuel (its rows' instruction budget): a loop that does not end."""
    MEMORY = "memory"
    """The module needed more memory than its cap."""
    TRAP = "trap"
    """The module trapped: division by zero, ``unreachable``, an out-of-bounds access."""
    STATUS = "status"
    """The function returned a non-zero status."""
    ABI = "abi"
    """The module broke the ABI: a pointer outside its memory."""


class WasmUdfError(ThalwegError):
    """A call of a WASM function failed on a chunk of rows; :attr:`kind` says why.

    Args:
        message: What failed, where, and what to do.
        kind: The :class:`UdfFailure` code.
    """

    __module__ = "thalweg_bytewax.udf"

    def __init__(self, message: str, kind: UdfFailure | str) -> None:
        super().__init__(message, str(kind))

    @property
    def kind(self) -> UdfFailure:
        """Why the call failed."""
        return UdfFailure(self.args[1])


@dataclass(frozen=True)
class RowFailure:
    """Rows ``start`` to ``stop - 1`` of the input, which failed with ``error``."""

    start: int
    stop: int
    error: WasmUdfError


@dataclass(frozen=True)
class UdfResult:
    """What :meth:`WasmFunction.apply` returns.

    Attributes:
        values: The function's output for the rows that succeeded, in input order.
        ok: The input indices of those rows; ``None`` when every row succeeded.
        failures: The failed row ranges, in input order, each with its error.
    """

    values: pa.Array
    ok: np.ndarray | None
    failures: tuple[RowFailure, ...]
