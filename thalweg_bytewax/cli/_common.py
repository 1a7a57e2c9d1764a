"""What the command modules share: exit codes, examples on each ``--help``, flows, progress."""

from __future__ import annotations

import argparse
from typing import Any

from thalweg_bytewax.config._user_module import import_user_module
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "EXAMPLES",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Progress",
    "attach_examples",
    "load_flow",
    "output_ids",
]

EXIT_OK = 0
"""The command did what it was asked."""
EXIT_FAILED = 1
"""The command ran and found a problem it reports (a secret reference that does not
resolve, a batch run whose files were rejected)."""
EXIT_USAGE = 2
"""Bad arguments or configuration: a ``ThalwegError`` (one line on stderr) or argparse."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C)."""

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "thalweg dev broker &",
        "thalweg dev produce --count 100000",
        "thalweg batch pipeline.toml --files 'exports/*.parquet'",
    ),
    "dev": ("thalweg dev broker &",),
    "dev broker": ("thalweg dev broker &   # then: thalweg dev produce",),
    "dev produce": ("thalweg dev produce --count 100000 --topic orders",),
    "dev postgres": (
        "thalweg dev postgres &",
        "export THALWEG_POSTGRES_DSN=$(thalweg dev postgres --print-dsn)",
    ),
    "lane": ("thalweg lane stats thalweg-data/raw",),
    "lane stats": ("thalweg lane stats thalweg-data/raw",),
    "recovery": ("thalweg recovery check flows.orders recovery/",),
    "recovery check": ("thalweg recovery check flows.orders recovery/",),
    "recovery migrate-keys": ("thalweg recovery migrate-keys flows.orders recovery/ --dry-run",),
    "coverage": ("thalweg coverage thalweg-data/raw --raw-lane orders.raw_lane",),
    "recover": ("thalweg recover flows.orders --sink ice_orders",),
    "check": ("thalweg check flows.orders",),
    "describe-schema": (
        "thalweg describe-schema --avsc thalweg_bytewax/flows/schemas/1.avsc",
        "thalweg describe-schema --registry http://localhost:8081 --subject orders-value",
    ),
    "batch": (
        "thalweg batch pipeline.toml --files 'exports/*.parquet'",
        "thalweg batch thalweg_bytewax/flows/orders.toml --files orders.ndjson --format ndjson",
    ),
    "run": (
        "thalweg run orders",
        "THALWEG_SAMPLE_ORDERS=1000 thalweg run orders -w 2",
        "THALWEG_CONFIG=pipeline.toml thalweg run pipeline",
    ),
    "cluster": (
        "thalweg cluster -r /data/recovery pipeline",
        "thalweg cluster -r recovery/ -s 10 orders -w 2",
    ),
    "sidecar": ("thalweg sidecar serve my_models.scoring:score --port 8815",),
    "sidecar serve": ("thalweg sidecar serve my_models.scoring:score --port 8815",),
    "config": ("thalweg config validate pipeline.toml",),
    "config validate": (
        "thalweg config validate orders.toml --model thalweg_bytewax.flows.orders:OrdersSettings",
    ),
    "config show": ("thalweg config show --set topic=payments",),
    "config secrets": ("thalweg config secrets pipeline.toml --format names",),
    "init": (
        "thalweg init pipeline.toml",
        "thalweg init orders.toml --model thalweg_bytewax.flows.orders:OrdersSettings",
    ),
    "proto": ("thalweg proto bundle protos/ --out-dir bundle",),
    "proto bundle": ("thalweg proto bundle protos/ --out-dir bundle --emit odcs",),
    "schema": ("thalweg schema to-odcs thalweg_bytewax/flows/schemas/1.avsc",),
    "schema to-odcs": ("thalweg schema to-odcs thalweg_bytewax/flows/schemas/1.avsc",),
    "query": (
        'thalweg query "select reason, count(*) from dlq group by 1"',
        'thalweg query --format csv "select * from sales.orders" > orders.csv',
    ),
    "describe": ("thalweg describe flows.orders > flow.mmd",),
}
"""Example command lines per command path (``"dev produce"``), shown by its ``--help``."""


def attach_examples(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give ``parser`` and every subcommand below it an ``example:`` epilog.

    A command that sets its own epilog keeps it; one with no entry in
    :data:`EXAMPLES` gets none (the CLI's help test names it).
    """
    examples = EXAMPLES.get(path)
    if examples and parser.epilog is None:
        parser.epilog = "example:\n" + "\n".join(f"  $ {e}" for e in examples)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, child in action.choices.items():
                attach_examples(child, f"{path} {name}".strip())


def load_flow(what: str, spec: str) -> Any:
    """The ``Dataflow`` at ``MODULE[:ATTR]`` (default attribute ``flow``).

    A bundled flow may be named as ``thalweg run`` names it (``orders``).

    Raises:
        ConfigError: When the module does not import or holds no dataflow there.
    """
    from bytewax.dataflow import Dataflow

    from thalweg_bytewax.flows import BUNDLED

    module_name, _, attr = spec.partition(":")
    module_name = BUNDLED.get(module_name, module_name)
    module = import_user_module(module_name, where=what)
    flow = getattr(module, attr or "flow", None)
    if not isinstance(flow, Dataflow):
        msg = (
            f"{what}: expected a `Dataflow` at `{module_name}:{attr or 'flow'}`; "
            f"got {type(flow).__name__}"
        )
        raise ConfigError(msg)
    return flow


def output_ids(flow: Any) -> list[str]:
    """The step ids of a dataflow's outputs, in the order they were added."""

    def walk(steps: list[Any]) -> list[str]:
        out: list[str] = []
        for step in steps:
            out += [step.step_id] if type(step).__name__ == "output" else walk(step.substeps)
        return out

    return walk(flow.substeps)


class Progress:
    """A rich progress bar on stderr over planned offsets, updated per partition."""

    def __init__(self, total: int, *, enabled: bool, title: str = "recover") -> None:
        self._done: dict[str, int] = {}
        self._bar: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=False)
            self._task = self._bar.add_task(title, total=total)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, key: str, done: int) -> None:
        """Record that partition ``key`` has done ``done`` units; redraw the bar."""
        self._done[key] = done
        if self._bar is not None:
            self._bar.update(self._task, completed=sum(self._done.values()))
