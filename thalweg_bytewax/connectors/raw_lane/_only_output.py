"""Private: a flow pruned to the one output a recovery writes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bytewax.dataflow import Dataflow

from thalweg_bytewax.errors import ConfigError

__all__ = ["only_output"]


def _outputs(steps: list[Any]) -> Iterator[tuple[list[Any], Any]]:
    for step in steps:
        if type(step).__name__ == "output" and hasattr(step, "sink"):
            yield steps, step
        else:
            yield from _outputs(step.substeps)


def only_output(flow: Dataflow, sink: str) -> Dataflow:
    """``flow`` writing to one output step only: every other output step is removed.

    What ``thalweg recover`` runs: the flow's own path (decode, contract, SQL) into the
    one lagging sink, under the same flow and step ids, so the sink finds its own
    target, its replay checks and its coverage rows.

    Args:
        flow: The flow, built with the raw lane source in place of its input.
        sink: The output's step name (``"orders_lane"``) or step id
            (``"orders.orders_lane"``).

    Returns:
        The same dataflow object, pruned.

    Raises:
        ConfigError: When no output step has that name, listing the ones it has.
    """
    found = list(_outputs(flow.substeps))
    kept = [s for _, s in found if sink in (s.step_id, s.step_name)]
    if len(kept) != 1:
        names = ", ".join(f"`{s.step_id}`" for _, s in found) or "none"
        msg = (
            f"recover: flow `{flow.flow_id}` expected one output step named `{sink}`; got "
            f"{len(kept)} among its outputs {names}"
        )
        raise ConfigError(msg)
    for parent, step in found:
        if step is not kept[0]:
            parent.remove(step)
    return flow
