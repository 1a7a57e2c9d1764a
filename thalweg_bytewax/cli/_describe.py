"""``thalweg describe MODULE[:FLOW]``: a flow's steps, drawn from the ``Dataflow`` itself.

The graph is Bytewax's own: each top-level step of the dataflow (an input, an operator as
the user called it, an output) is a node; a step's nested substeps are collapsed into it.
An edge joins the step that produces a stream to each step that reads it, labelled with
the producer's port (``ok``, ``rejected``) when it has more than one.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from thalweg_bytewax.cli._common import load_flow
from thalweg_bytewax.cli._subcommand import add_subcommand

__all__ = ["FlowGraph", "add_commands", "flow_graph", "to_mermaid", "to_text"]


@dataclass(frozen=True)
class FlowGraph:
    """A dataflow's top-level steps and the streams between them.

    Attributes:
        flow_id: The dataflow's id.
        steps: ``(step name, operator kind)`` in the order the flow added them; the name
            is the step id without the flow id.
        edges: ``(from step, port label, to step)``; the label is ``""`` for a step with
            one output port.
    """

    flow_id: str
    steps: list[tuple[str, str]]
    edges: list[tuple[str, str, str]]


def _ports(step: Any, names: list[str]) -> list[tuple[str, str]]:
    """``(port name, stream id)`` of ``step``'s ports ``names`` (single and multi ports)."""
    return [(name, stream) for name in names for stream in getattr(step, name).stream_ids.values()]


def flow_graph(flow: Any) -> FlowGraph:
    """The graph of ``flow``'s top-level steps (a ``bytewax.dataflow.Dataflow``)."""
    prefix = f"{flow.flow_id}."
    steps: list[tuple[str, str]] = []
    producers: dict[str, tuple[str, str, int]] = {}
    for step in flow.substeps:
        name = step.step_id.removeprefix(prefix)
        steps.append((name, type(step).__name__))
        for port, stream in _ports(step, list(step.dwn_names)):
            producers[stream] = (name, port, len(step.dwn_names))
    edges = []
    for step in flow.substeps:
        for _, stream in _ports(step, list(step.ups_names)):
            source, port, n_ports = producers[stream]
            edges.append((source, port if n_ports > 1 else "", step.step_id.removeprefix(prefix)))
    return FlowGraph(flow.flow_id, steps, edges)


def _node_id(name: str) -> str:
    return "step_" + re.sub(r"\W", "_", name)


def _node(name: str, kind: str) -> str:
    label = name if kind == name else f"{name}<br/><i>{kind}</i>"
    shape = {"input": ('(["', '"])'), "output": ('[("', '")]')}.get(kind, ('["', '"]'))
    return f"{_node_id(name)}{shape[0]}{label}{shape[1]}"


def to_mermaid(graph: FlowGraph) -> str:
    """The graph as a Mermaid ``flowchart LR``: inputs rounded, outputs as cylinders."""
    lines = ["flowchart LR"]
    lines += [f"    {_node(name, kind)}" for name, kind in graph.steps]
    for source, port, target in graph.edges:
        arrow = f"-- {port} -->" if port else "-->"
        lines.append(f"    {_node_id(source)} {arrow} {_node_id(target)}")
    return "\n".join(lines) + "\n"


def to_text(graph: FlowGraph) -> str:
    """The graph as one line per step: kind, name and the streams it reads."""
    reads: dict[str, list[str]] = {}
    for source, port, target in graph.edges:
        reads.setdefault(target, []).append(f"{source}.{port}" if port else source)
    width = max((len(n) for n, _ in graph.steps), default=0)
    kind_width = max((len(k) for _, k in graph.steps), default=0)
    lines = [f"flow {graph.flow_id}: {len(graph.steps)} steps"]
    for name, kind in graph.steps:
        ups = reads.get(name)
        tail = f"  <- {', '.join(ups)}" if ups else ""
        lines.append(f"  {kind:<{kind_width}}  {name:<{width}}{tail}".rstrip())
    return "\n".join(lines) + "\n"


def _describe(args: argparse.Namespace) -> int:
    """Draw a flow's steps (Mermaid flowchart).

    Draw a dataflow's steps from the Dataflow object: inputs, the operators as called (their nested
    steps collapsed) and outputs, joined by the streams between them.
    """
    graph = flow_graph(load_flow("describe", args.flow))
    print(to_mermaid(graph) if args.format == "mermaid" else to_text(graph), end="")
    return 0


def add_commands(sub: Any) -> None:
    """Add ``describe`` to the CLI's subparsers."""
    describe = add_subcommand(sub, "describe", _describe)
    describe.add_argument(
        "flow", help="the flow as `python -m bytewax.run` takes it: MODULE[:FLOW]"
    )
    describe.add_argument(
        "--format",
        choices=("mermaid", "text"),
        default="mermaid",
        help="mermaid (a flowchart for Markdown) or text (default: mermaid)",
    )
