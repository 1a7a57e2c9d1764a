"""Loading a WASM UDF module: bounded in size, importing nothing, compiled once per process.

A module is read with a size bound (:data:`DEFAULT_MAX_MODULE_BYTES`) before anything
is allocated for it, compiled by one process-wide ``wasmtime.Engine`` with fuel metering
on, and cached by the SHA-256 of its bytes, so every function, batch and worker thread
of a process shares one compiled ``wasmtime.Module``.

The sandbox is the empty import list: a module that imports anything (a WASI function
such as ``wasi_snapshot_preview1.fd_write`` / ``path_open`` / ``clock_time_get`` /
``environ_get`` / ``sock_*``, an ``env`` host function, an imported memory or table) is
refused here, at load, naming the import. The host links nothing, so no filesystem,
network, environment, clock or randomness is reachable from inside the module; its only
way out is the ABI's buffers (:mod:`thalweg_bytewax.udf.function`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from thalweg_bytewax._deps import require
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "ABI_ALLOC",
    "ABI_MEMORY",
    "DEFAULT_MAX_MODULE_BYTES",
    "WasmModule",
    "WasmModuleError",
    "describe",
    "is_signature",
    "wasmtime",
]

DEFAULT_MAX_MODULE_BYTES = 16 * 1024 * 1024
"""The largest module :meth:`WasmModule.from_file` reads (16 MiB): UDF modules built
``opt-level = "s"`` are kilobytes; the example is under 1 KiB."""

ABI_MEMORY = "memory"
"""The export every module must have: its linear memory (32-bit)."""
ABI_ALLOC = "twg_alloc"
"""The export every module must have: ``twg_alloc(size: i32) -> i32``, an 8-byte aligned
pointer to ``size`` fresh bytes, 0 when it cannot grow memory."""

# Compiled modules kept per process; each is tens of KiB of machine code.
_CACHE_ENTRIES = 64


class WasmModuleError(ConfigError):
    """A WASM module is refused at load: too large, not WASM, imports, or missing exports."""

    __module__ = "thalweg_bytewax.udf"


def wasmtime() -> Any:
    """The ``wasmtime`` package, or :class:`MissingDependencyError` naming the ``wasm`` extra."""
    return require("wasmtime", extra="wasm")


_lock = threading.Lock()
_engine: tuple[int, Any] | None = None
_compiled: OrderedDict[tuple[int, bytes], Any] = OrderedDict()


@atexit.register
def _release() -> None:
    """Free the compiled modules and the engine while wasmtime can still free them.

    Left to interpreter shutdown, their finalisers run after wasmtime's own bindings are
    gone and print a ``TypeError`` each.
    """
    global _engine
    with _lock:
        _compiled.clear()
        _engine = None


def _engine_now() -> Any:
    global _engine
    pid = os.getpid()
    with _lock:
        if _engine is None or _engine[0] != pid:
            wt = wasmtime()
            config = wt.Config()
            config.consume_fuel = True
            # Shared memory and atomics are of no use to a pure function over a chunk.
            config.wasm_threads = False
            _engine = (pid, wt.Engine(config))
        return _engine[1]


def _compile(digest: bytes, data: bytes, name: str) -> Any:
    engine = _engine_now()
    key = (os.getpid(), digest)
    with _lock:
        module = _compiled.get(key)
        if module is not None:
            _compiled.move_to_end(key)
            return module
    wt = wasmtime()
    try:
        module = wt.Module(engine, data)
    except wt.WasmtimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = (
            f"wasm module `{name}`: expected a WebAssembly binary; got bytes wasmtime "
            f"cannot compile ({first}); build it with "
            f"`cargo build --target wasm32-unknown-unknown --release`"
        )
        raise WasmModuleError(msg) from exc
    with _lock:
        _compiled[key] = module
        while len(_compiled) > _CACHE_ENTRIES:
            _compiled.popitem(last=False)
    return module


class WasmModule:
    """A checked WASM UDF module: its bytes, compiled once per process on first use.

    Construction checks everything that does not depend on data: the size bound, that
    the bytes compile, that the module imports nothing, and that it exports a 32-bit
    ``memory`` and ``twg_alloc(i32) -> i32`` (:data:`ABI_ALLOC`). Pickling keeps the
    bytes; the compiled module is looked up again (or compiled) in the new process.

    Args:
        data: The module's bytes (a ``.wasm`` binary; ``wasmtime.wat2wasm`` gives one
            from WAT text).
        name: How messages name the module (default: its file name, or ``"module"``).
        max_bytes: The size bound (default 16 MiB).

    Raises:
        WasmModuleError: When the module is too large, is not WASM, imports anything or
            lacks an ABI export; the message names the module and the remedy.
        MissingDependencyError: When ``wasmtime`` is not installed (the ``wasm`` extra).
    """

    def __init__(
        self,
        data: bytes | bytearray,
        *,
        name: str = "module",
        max_bytes: int = DEFAULT_MAX_MODULE_BYTES,
    ) -> None:
        wasmtime()
        if len(data) > max_bytes:
            msg = (
                f"wasm module `{name}`: expected at most {max_bytes} bytes; got "
                f'{len(data)}; build it with opt-level "s" and panic = "abort", or '
                f"raise `max_bytes`"
            )
            raise WasmModuleError(msg)
        self.name = name
        self.data = bytes(data)
        self.digest = hashlib.sha256(self.data).digest()
        self._check(self.compiled())

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_MODULE_BYTES
    ) -> WasmModule:
        """Read a ``.wasm`` file, refusing one larger than ``max_bytes`` before reading it.

        Raises:
            WasmModuleError: As the constructor, or when the file cannot be read.
        """
        p = Path(path)
        try:
            size = p.stat().st_size
            if size > max_bytes:
                msg = (
                    f"wasm module `{p.name}`: expected at most {max_bytes} bytes; got "
                    f'{size}; build it with opt-level "s" and panic = "abort", or raise '
                    f"`max_bytes`"
                )
                raise WasmModuleError(msg)
            with p.open("rb") as f:
                data = f.read(max_bytes + 1)  # the file may grow after the stat
        except OSError as exc:
            msg = (
                f"wasm module `{p}`: expected a readable file; got "
                f"{type(exc).__name__}: {exc.strerror}"
            )
            raise WasmModuleError(msg) from exc
        return cls(data, name=p.name, max_bytes=max_bytes)

    def __getstate__(self) -> dict[str, Any]:
        return {"data": self.data, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name = state["name"]
        self.data = state["data"]
        self.digest = hashlib.sha256(self.data).digest()

    def __repr__(self) -> str:
        return f"WasmModule({self.name!r}, {len(self.data)} bytes)"

    def compiled(self) -> Any:
        """The ``wasmtime.Module`` of this process (compiled on first use, then cached)."""
        return _compile(self.digest, self.data, self.name)

    def engine(self) -> Any:
        """The process's ``wasmtime.Engine`` (fuel metering on), shared by every module."""
        return _engine_now()

    def export_type(self, name: str) -> Any:
        """The type of the export ``name`` (a ``FuncType``, ``MemoryType``...), or ``None``."""
        for export in self.compiled().exports:
            if export.name == name:
                return export.type
        return None

    def _check(self, module: Any) -> None:
        wt = wasmtime()
        imports = [f"{i.module}.{i.name}" for i in module.imports]
        if imports:
            shown = ", ".join(f"`{i}`" for i in imports[:5])
            more = f" and {len(imports) - 5} more" if len(imports) > 5 else ""
            msg = (
                f"wasm module `{self.name}`: expected a module that imports nothing (a UDF "
                f"gets no WASI, filesystem, network, environment or clock); got imports "
                f"{shown}{more}; build it for `wasm32-unknown-unknown` without std I/O"
            )
            raise WasmModuleError(msg)
        memory = self.export_type(ABI_MEMORY)
        if not isinstance(memory, wt.MemoryType) or memory.is_64:
            msg = (
                f"wasm module `{self.name}`: expected a 32-bit linear memory exported as "
                f"`{ABI_MEMORY}`; got {'none' if memory is None else memory}"
            )
            raise WasmModuleError(msg)
        alloc = self.export_type(ABI_ALLOC)
        if not is_signature(alloc, 1):
            msg = (
                f"wasm module `{self.name}`: expected an export `{ABI_ALLOC}(size: i32) -> "
                f"i32` (see the ABI in docs/how-to/wasm-udf.md); got "
                f"{'none' if alloc is None else describe(alloc)}"
            )
            raise WasmModuleError(msg)


def is_signature(func: Any, params: int) -> bool:
    """Whether ``func`` is a ``FuncType`` of ``params`` i32 parameters and one i32 result."""
    wt = wasmtime()
    if not isinstance(func, wt.FuncType):
        return False
    i32 = wt.ValType.i32()
    return (
        len(func.params) == params
        and all(p == i32 for p in func.params)
        and len(func.results) == 1
        and func.results[0] == i32
    )


def describe(func: Any) -> str:
    """An export's type for messages: ``(i32, i32) -> (i32)``."""
    wt = wasmtime()
    if not isinstance(func, wt.FuncType):
        return f"a {type(func).__name__}"
    params = ", ".join(str(p) for p in func.params)
    results = ", ".join(str(r) for r in func.results)
    return f"({params}) -> ({results})"
