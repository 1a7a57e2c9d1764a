"""The one error root: every error pickles with its fields, shows its public module and
says whether retrying can help.

The subclasses are found by walking ``ThalwegError.__subclasses__()`` after importing
every module of the package, so a new error class is covered without touching this file.
"""

from __future__ import annotations

import errno
import importlib
import inspect
import pickle
import pkgutil
from typing import Any

import pytest

import thalweg_bytewax
from thalweg_bytewax.codecs import FailureKind
from thalweg_bytewax.errors import (
    ConfigError,
    DecodeError,
    SchemaError,
    SinkTerminalError,
    SinkTransientError,
    ThalwegError,
    TransientError,
    sink_io_error,
)

_PACKAGES = ("thalweg_bytewax", "thalweg_bytewax.connectors", "thalweg_bytewax.operators")


def _import_everything() -> None:
    for name in _PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def _all_subclasses(cls: type[ThalwegError]) -> list[type[ThalwegError]]:
    found: list[type[ThalwegError]] = []
    todo = [cls]
    while todo:
        c = todo.pop()
        found.append(c)
        todo.extend(c.__subclasses__())
    # Classes defined inside test modules are not the library's.
    return sorted(
        {c for c in found if c.__module__.startswith("thalweg_bytewax")},
        key=lambda c: (c.__module__, c.__qualname__),
    )


_import_everything()
ERRORS = _all_subclasses(ThalwegError)


def _instance(cls: type[ThalwegError]) -> ThalwegError:
    """One instance with every constructor argument set to a distinct, checkable value."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    args: list[Any] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name == "kind":
            args.append(FailureKind.SCHEMA_MISMATCH)
        elif p.name == "message" or not args:
            args.append(f"{cls.__name__.lower()} `thing`: expected x; got 'y'")
        else:
            args.append(f"{p.name}-value")
    return cls(*args)


def test_the_walk_finds_the_error_tree() -> None:
    names = {c.__name__ for c in ERRORS}
    assert {
        "ThalwegError", "ConfigError", "DecodeError", "AvroDecodeError", "JsonDecodeError",
        "ProtobufDecodeError", "FramingError", "SchemaLookupError", "RegistryUnavailableError",
        "UnknownSchemaError", "SinkTransientError", "ContractViolationError",
    } <= names  # fmt: skip


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__qualname__)
def test_every_error_pickles_and_keeps_its_fields(cls: type[ThalwegError]) -> None:
    e = _instance(cls)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert back.args == e.args
    assert str(back) == str(e) == e.message == back.message
    assert vars(back) == vars(e)
    assert back.retryable is e.retryable
    if isinstance(e, DecodeError):
        assert isinstance(back, DecodeError)
        assert back.kind is e.kind is FailureKind.SCHEMA_MISMATCH


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__qualname__)
def test_every_error_shows_the_public_module_it_is_imported_from(cls: type[ThalwegError]) -> None:
    module = cls.__module__
    assert not any(part.startswith("_") for part in module.split(".")), module
    public = importlib.import_module(module)
    assert getattr(public, cls.__qualname__) is cls
    assert cls.__name__ in public.__all__


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__qualname__)
def test_every_error_says_whether_retrying_can_help(cls: type[ThalwegError]) -> None:
    assert isinstance(cls.retryable, bool)
    assert cls.retryable is issubclass(cls, TransientError)


def test_the_retry_axis_where_it_matters() -> None:
    from thalweg_bytewax.registry import (  # noqa: PLC0415
        RegistryError,
        RegistryUnavailableError,
        UnknownSchemaError,
    )

    transient: list[type[ThalwegError]] = [RegistryUnavailableError, SinkTransientError]
    terminal: list[type[ThalwegError]] = [
        ConfigError, DecodeError, SchemaError, RegistryError, UnknownSchemaError,
        SinkTerminalError,
    ]  # fmt: skip
    assert all(c.retryable for c in transient)
    assert not any(c.retryable for c in terminal)
    # A registry outage is still a schema-area error, so `except SchemaError` sees it.
    assert issubclass(RegistryUnavailableError, SchemaError)


def test_decode_error_kind_defaults_per_codec_and_is_validated() -> None:
    from thalweg_bytewax.codecs.avro import AvroDecodeError  # noqa: PLC0415
    from thalweg_bytewax.codecs.framing import FramingError  # noqa: PLC0415
    from thalweg_bytewax.codecs.json import JsonDecodeError  # noqa: PLC0415
    from thalweg_bytewax.codecs.protobuf import SchemaLookupError  # noqa: PLC0415

    assert AvroDecodeError("x").kind is FailureKind.MALFORMED
    assert JsonDecodeError("x").kind is FailureKind.SCHEMA_MISMATCH
    assert FramingError("x").kind is FailureKind.BAD_FRAMING
    assert SchemaLookupError("x").kind is FailureKind.UNKNOWN_SCHEMA
    assert DecodeError("x", "null_payload").kind is FailureKind.NULL_PAYLOAD
    assert DecodeError("x", FailureKind.RESERVED_FIELD).args == ("x", FailureKind.RESERVED_FIELD)
    for sub in (AvroDecodeError, JsonDecodeError, FramingError, SchemaLookupError):
        # Trivial subclasses: no constructor or fields of their own.
        assert "__init__" not in vars(sub) and "__str__" not in vars(sub)


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        (errno.ENOSPC, True),
        (errno.EDQUOT, True),
        (errno.EAGAIN, True),
        (errno.ETIMEDOUT, True),
        (errno.EACCES, False),
        (errno.ENOENT, False),
        (errno.EROFS, False),
        (None, False),
    ],
)
def test_sink_io_errors_are_classified_by_errno(code: int | None, transient: bool) -> None:
    exc = OSError(code, "boom") if code is not None else OSError("no errno")
    err = sink_io_error("parquet sink `lake/orders`: cannot write `a.parquet`", exc)
    assert err.retryable is transient
    assert isinstance(err, SinkTransientError if transient else SinkTerminalError)
    assert err.message.startswith("parquet sink `lake/orders`: cannot write `a.parquet` (")
    assert not err.message.endswith(".")


def test_the_package_root_exports_the_whole_core_tree() -> None:
    for name in ("ThalwegError", "TransientError", "ConfigError", "DecodeError"):
        assert getattr(thalweg_bytewax, name) is getattr(thalweg_bytewax.errors, name)
