"""``thalweg describe``: a flow's steps and streams, from the ``Dataflow`` object itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource

from thalweg_bytewax.cli import EXIT_OK, EXIT_USAGE, main
from thalweg_bytewax.cli._describe import flow_graph, to_mermaid, to_text

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "flows" / "orders.md"
_GENERATED = re.compile(
    r"<!-- generated: thalweg describe flows.orders -->\n```mermaid\n(.*?)```\n", re.S
)

flow = Dataflow("tiny")
_numbers = op.input("numbers", flow, TestingSource([1, 2, 3]))
_split = op.branch("split", _numbers, lambda x: x % 2 == 0)
_both = op.merge("both", op.map("double", _split.trues, lambda x: x * 2), _split.falses)
op.output("out", _both, TestingSink([]))


def test_nested_steps_collapse_and_ports_label_the_edges():
    graph = flow_graph(flow)
    assert graph.steps == [
        ("numbers", "input"),
        ("split", "branch"),
        ("double", "map"),
        ("both", "merge"),
        ("out", "output"),
    ]
    assert graph.edges == [
        ("numbers", "", "split"),
        ("split", "trues", "double"),
        ("double", "", "both"),  # merge reads a multi-port: one edge per stream
        ("split", "falses", "both"),
        ("both", "", "out"),
    ]
    mermaid = to_mermaid(graph)
    assert mermaid.startswith("flowchart LR\n")
    assert 'step_numbers(["numbers<br/><i>input</i>"])' in mermaid
    assert "step_split -- trues --> step_double" in mermaid
    assert "  merge   both     <- double, split.falses\n" in to_text(graph)


def test_the_command_takes_module_and_attribute(capsys):
    assert main(["describe", f"{__name__}:flow", "--format", "text"]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[0] == "flow tiny: 5 steps"


def test_a_module_without_a_flow_is_named(capsys):
    assert main(["describe", f"{__name__}:nothing"]) == EXIT_USAGE
    assert "expected a `Dataflow`" in capsys.readouterr().err


@pytest.mark.slow
def test_the_orders_doc_holds_the_diagram_the_command_draws():
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    drawn = subprocess.run(
        [sys.executable, "-m", "thalweg_bytewax.cli", "describe", "flows.orders"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    found = _GENERATED.search(DOC.read_text(encoding="utf-8"))
    assert found, f"{DOC} lost its generated diagram block"
    assert found.group(1) == drawn, (
        "docs/flows/orders.md no longer shows the flow's steps: paste the output of "
        "`thalweg describe flows.orders` into its generated block"
    )
