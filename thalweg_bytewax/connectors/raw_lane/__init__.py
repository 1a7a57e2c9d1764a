"""The raw lane as a source: replay the records a Parquet raw lane holds, in offset order.

``from thalweg_bytewax.connectors.raw_lane import RawLaneSource`` is the public import
path (``thalweg_bytewax.connectors.raw_lane_source``, its earlier name, still resolves,
with a ``DeprecationWarning``). :class:`RawLaneSource` (module ``source``) is what
``thalweg recover`` reads instead of Kafka; :class:`RawLaneSourceConfig` (module
``config``) is its settings, what a pipeline's ``[source]`` with ``kind = "raw_lane"``
loads. :func:`lane_held_offsets` and :func:`lane_rows_missing` say what a lane's files
hold; :func:`only_output` prunes a flow to the one sink a recovery writes.

The private modules behind them: the lane's storage (``_store``: local or remote
directories, staging, finalize) and the names in it (``_names``), the footer claim a
lane file carries (``_claim``), what a lane's files hold (``_contents``), the partition
of one topic-partition (``_partition``), the flow pruning (``_only_output``) and the
staging and shard settings the lane sinks share (``_shards``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thalweg_bytewax._lazy import lazy_package

if TYPE_CHECKING:
    from ._contents import lane_held_offsets, lane_rows_missing
    from ._only_output import only_output
    from ._partition import ProgressCallback
    from .config import DEFAULT_BATCH_SIZE, RawLaneSourceConfig
    from .source import RawLaneSource

# Public name -> the submodule that defines it, imported on first access (reading a
# configuration loads no reader).
_LAZY = {
    "DEFAULT_BATCH_SIZE": ".config",
    "ProgressCallback": "._partition",
    "RawLaneSource": ".source",
    "RawLaneSourceConfig": ".config",
    "lane_held_offsets": "._contents",
    "lane_rows_missing": "._contents",
    "only_output": "._only_output",
}

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ProgressCallback",
    "RawLaneSource",
    "RawLaneSourceConfig",
    "lane_held_offsets",
    "lane_rows_missing",
    "only_output",
]

__getattr__, __dir__ = lazy_package(__name__, _LAZY, globals())
