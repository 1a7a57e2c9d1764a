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

from thalweg_bytewax._lazy import lazy_reexports

if TYPE_CHECKING:
    from ._contents import lane_held_offsets as lane_held_offsets
    from ._contents import lane_rows_missing as lane_rows_missing
    from ._only_output import only_output as only_output
    from ._partition import ProgressCallback as ProgressCallback
    from .config import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE
    from .config import RawLaneSourceConfig as RawLaneSourceConfig
    from .source import RawLaneSource as RawLaneSource

__getattr__, __dir__ = lazy_reexports(globals())
