"""Private: the choice between the native batch consume and confluent-kafka's messages.

``thalweg_bytewax._kafka_native`` (an optional extension, see ``setup.py``) consumes
partitions into Arrow buffers over the librdkafka bundled in confluent-kafka's wheel; the
pure path reads confluent-kafka ``Message`` objects. Both build the same RawBatches (the
differential tests prove it on the fidelity corpus). ``THALWEG_KAFKA_CONSUME`` chooses:
``auto`` (default: native when available), ``pure`` or ``native`` (fail when missing).
"""

from __future__ import annotations

import glob
import importlib
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import confluent_kafka

from thalweg_bytewax.errors import ConfigError

__all__ = ["CONSUME_ENV", "native_settings", "open_native", "use_native"]

logger = logging.getLogger(__name__)

CONSUME_ENV = "THALWEG_KAFKA_CONSUME"
"""Environment variable choosing the consume path: ``auto``, ``pure`` or ``native``."""

_MODES = ("auto", "pure", "native")
_state: dict[str, Any] = {}
_clients_lock = threading.Lock()


def _library() -> str | None:
    root = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    for pattern in ("../confluent_kafka.libs/librdkafka*.so*", ".libs/librdkafka*.so*"):
        found = sorted(glob.glob(os.path.join(root, pattern)))
        if found:
            return os.path.normpath(found[0])
    return None


def _load() -> tuple[Any, str]:
    """The native module, or None and why not (cached per process)."""
    if "module" in _state:
        return _state["module"], _state["why"]
    module: Any = None
    why = ""
    try:
        _kafka_native: Any = importlib.import_module("thalweg_bytewax._kafka_native")
    except ImportError:
        why = "the `thalweg_bytewax._kafka_native` extension is not built"
    else:
        path = _library()
        if path is None:
            why = "confluent-kafka's wheel bundles no librdkafka to load"
        else:
            try:
                _kafka_native.load(path)
            except OSError as exc:
                why = f"librdkafka could not be loaded ({exc})"
            else:
                module = _kafka_native
    _state["module"], _state["why"] = module, why
    return module, why


def use_native(settings: Mapping[str, Any]) -> bool:
    """Whether a partition with these consumer settings reads through the native path.

    Logs the choice once per process and reason.

    Raises:
        ConfigError: When ``THALWEG_KAFKA_CONSUME`` is invalid, or ``native`` is asked
            for and cannot run.
    """
    mode = os.environ.get(CONSUME_ENV, "auto").strip().lower() or "auto"
    if mode not in _MODES:
        msg = (
            f"kafka source: `{CONSUME_ENV}` expected one of {', '.join(_MODES)}; "
            f"got {mode!r}"
        )
        raise ConfigError(msg)
    if mode == "pure":
        _log_once("pure", "kafka source: reading through confluent-kafka messages (%s)", mode)
        return False
    module, why = _load()
    callbacks = sorted(k for k, v in settings.items() if callable(v))
    if module is not None and callbacks:
        why = f"the settings hold Python callbacks ({', '.join(callbacks)})"
    if module is None or callbacks:
        if mode == "native":
            msg = (
                f"kafka source: `{CONSUME_ENV}=native` cannot run: {why}; "
                f"rebuild the package with a C compiler or unset `{CONSUME_ENV}`"
            )
            raise ConfigError(msg)
        _log_once(
            "pure:" + why, "kafka source: reading through confluent-kafka messages: %s", why
        )
        return False
    _log_once("native", "kafka source: reading with the native batch consume (Arrow buffers)")
    return True


def _log_once(key: str, fmt: str, *args: object) -> None:
    logged: set[str] = _state.setdefault("logged", set())
    if key not in logged:
        logged.add(key)
        logger.info(fmt, *args)


def native_settings(settings: Mapping[str, Any]) -> dict[str, str]:
    """The consumer settings as librdkafka strings (booleans as ``true``/``false``)."""
    out: dict[str, str] = {}
    for k, v in settings.items():
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def open_native(settings: Mapping[str, Any], *, resumes_epoch: bool = False) -> Any:
    """A native consumer of one partition (``use_native`` must have said yes).

    The partitions a worker thread opens with the same settings share one librdkafka
    handle (``Client``), each reading its own partition queue: one fetch request per
    broker and one set of client threads instead of one per partition. The handle
    closes with its last consumer.

    Args:
        settings: The consumer settings.
        resumes_epoch: Whether the partition resumes at a position with a known leader
            epoch. librdkafka validates that epoch against the broker's log only when
            the handle learns the topic's leaders after the assignment, so such a
            partition opened after the shared handle started reading gets a new
            handle (which later partitions then share).

    Raises:
        ConfigError: When librdkafka refuses a setting (it names the property).
    """
    module, _ = _load()
    strings = native_settings(settings)
    key = (threading.get_ident(), tuple(sorted(strings.items())))
    with _clients_lock:  # workers build their partitions concurrently
        clients: dict[Any, Any] = _state.setdefault("clients", {})
        client = clients.get(key)
        if client is None or client.closed or (resumes_epoch and client.started):
            try:
                client = module.Client(strings)
            except ValueError as exc:
                msg = (
                    f"kafka source: librdkafka refused the consumer setting {exc} of the "
                    f"native consume; fix it in `add_config` or set `{CONSUME_ENV}=pure`"
                )
                raise ConfigError(msg) from exc
            # Drop handles closed since (their key may differ: another thread's).
            for stale in [k for k, c in clients.items() if c.closed]:
                del clients[stale]
            clients[key] = client
        return module.Consumer(client)
