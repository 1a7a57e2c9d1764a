"""Transparent huge pages off in a process that runs a flow: the same work, less memory.

pyarrow's default allocator (mimalloc) asks the kernel for transparent huge pages for
its memory (``madvise(MADV_HUGEPAGE)``), so on a kernel whose huge pages are
``madvise`` or ``always`` (``/sys/kernel/mm/transparent_hugepage/enabled``) the first
touch of any 2 MiB of it makes all 2 MiB resident, zeroed, however little of it is
used. A flow's batches and Parquet writers touch memory that way: measured on the
decode memory benchmark (pyarrow 26, ``madvise`` kernel), peak RSS 30-50 MB higher with
them than without, the raw lane's 50-75 MB, at the same CPU a record
(docs/benchmarks.md, "Where the decode flow's memory goes").

So the first source or sink partition a process builds turns them off for the process
(``prctl(PR_SET_THP_DISABLE)``: no new huge page is faulted in, whoever asked for it;
pages already faulted stay). ``THALWEG_HUGE_PAGES=keep`` leaves the process as it is.
Nothing changes in a process that only imports the package (the CLI, a notebook).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading

from thalweg_bytewax.errors import ConfigError

__all__ = ["HUGE_PAGES_ENV", "huge_pages_disabled", "limit_huge_pages"]

logger = logging.getLogger(__name__)

HUGE_PAGES_ENV = "THALWEG_HUGE_PAGES"
"""``keep`` leaves transparent huge pages as the process had them; ``off`` (default)."""

_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42
_lock = threading.Lock()
_done = False


def _prctl(option: int, arg: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.prctl(option, arg, 0, 0, 0))
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def huge_pages_disabled() -> bool | None:
    """Whether this process may fault in no transparent huge page; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    return _prctl(_PR_GET_THP_DISABLE) == 1


def limit_huge_pages() -> None:
    """Turn transparent huge pages off for this process, once (see the module).

    Called where a flow builds its first source or sink partition. A value of
    ``THALWEG_HUGE_PAGES`` other than ``keep`` or ``off`` is refused loudly.
    """
    global _done  # noqa: PLW0603 - once per process
    if _done:
        return
    choice = os.environ.get(HUGE_PAGES_ENV, "off").strip().lower()
    if choice not in ("off", "keep"):
        msg = f"`{HUGE_PAGES_ENV}`: expected `off` or `keep`; got `{choice}`"
        raise ConfigError(msg)
    with _lock:
        if _done:
            return
        _done = True
        if choice == "keep" or not sys.platform.startswith("linux"):
            return
        try:
            _prctl(_PR_SET_THP_DISABLE, 1)
        except OSError as exc:  # a seccomp profile may refuse prctl: memory, not data
            logger.warning(
                "transparent huge pages stay on for this process (prctl refused: %s); "
                "set %s=keep to silence this",
                exc,
                HUGE_PAGES_ENV,
            )
            return
        logger.info(
            "transparent huge pages off for this process (%s=keep leaves them on)",
            HUGE_PAGES_ENV,
        )
