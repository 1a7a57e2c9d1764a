"""Private: the Arrow memory pool a process runs thalweg's flows with.

pyarrow's Linux wheels allocate Arrow buffers from mimalloc, which keeps the pages of
freed buffers for reuse: the decode flow's peak RSS was ~60 MB higher with it than with
jemalloc or the system allocator, at no less CPU a record (docs/connectors/kafka.md
"Memory"). Importing ``thalweg_bytewax`` therefore makes jemalloc pyarrow's default
pool (the system allocator where this pyarrow was built without jemalloc), unless the
process chose one itself:

* ``ARROW_DEFAULT_MEMORY_POOL`` set (pyarrow's own variable): pyarrow's choice stands;
* ``THALWEG_ARROW_POOL``: ``jemalloc`` (the default), ``system``, ``mimalloc``, or
  ``keep`` to leave pyarrow's default as it is.

Only the default pool changes: buffers allocated before keep their pool, and a
``pyarrow.set_memory_pool`` call after the import wins.
"""

from __future__ import annotations

import os

import pyarrow as pa

from thalweg_bytewax.errors import ConfigError

__all__ = ["ARROW_POOL_ENV", "install"]

ARROW_POOL_ENV = "THALWEG_ARROW_POOL"
"""The variable choosing the pool thalweg sets: ``jemalloc``, ``system``, ``mimalloc``
or ``keep``."""

_POOLS = {
    "jemalloc": pa.jemalloc_memory_pool,
    "system": pa.system_memory_pool,
    "mimalloc": pa.mimalloc_memory_pool,
}


def install() -> None:
    """Set pyarrow's default memory pool as ``THALWEG_ARROW_POOL`` says (``jemalloc``).

    Raises:
        ConfigError: When ``THALWEG_ARROW_POOL`` names no pool, or one this pyarrow
            was built without.
    """
    asked = os.environ.get(ARROW_POOL_ENV, "").strip().lower()
    choice = asked or "jemalloc"
    if choice not in (*_POOLS, "keep"):
        msg = f"`{ARROW_POOL_ENV}` expected one of {', '.join((*_POOLS, 'keep'))}; got {choice!r}"
        raise ConfigError(msg)
    if choice == "keep" or os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    try:
        pool = _POOLS[choice]()
    except NotImplementedError as exc:
        if not asked:  # the default, on a pyarrow without jemalloc
            pa.set_memory_pool(pa.system_memory_pool())
            return
        msg = (
            f"`{ARROW_POOL_ENV}={choice}`: this pyarrow was built without that allocator "
            f"({exc}); choose `system` or `keep`"
        )
        raise ConfigError(msg) from exc
    pa.set_memory_pool(pool)
