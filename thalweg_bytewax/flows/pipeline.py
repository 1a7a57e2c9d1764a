"""A whole flow from one TOML file: ``THALWEG_CONFIG=pipeline.toml thalweg run pipeline``.

(``python -m bytewax.run thalweg_bytewax.flows.pipeline``; from a checkout,
``python -m bytewax.run flows.pipeline`` runs the example that re-exports it.)

The file is a :class:`~thalweg_bytewax.pipeline.PipelineConfig` (``thalweg init``
writes a commented starter; ``thalweg_bytewax/flows/orders.toml`` is the orders flow as
one). Layers, later wins: the file < ``THALWEG_*`` variables
(``THALWEG_SOURCE__BOOTSTRAP_SERVERS``); ``thalweg config show FILE`` shows the merged
result. Resource paths in the file (schemas, contract) are relative to the file's
directory; lanes and the warehouse are under ``data_dir``.

With no ``THALWEG_CONFIG`` the default pipeline runs: the embedded sample orders into
a raw lane and a decode DLQ. Importing this module reads the configuration (and a
contract it names) and builds the dataflow; it starts no thread and reaches no broker,
registry, catalog or database.
"""

from __future__ import annotations

import os
from pathlib import Path

from thalweg_bytewax.config import CONFIG_ENV
from thalweg_bytewax.pipeline import PipelineConfig
from thalweg_bytewax.pipeline.build import build_pipeline, pipeline_source

__all__ = ["build_pipeline", "flow", "load_pipeline", "pipeline_source"]


def load_pipeline(file: str | Path | None = None) -> tuple[PipelineConfig, Path]:
    """Read a pipeline configuration and the directory its resource paths are relative to.

    Args:
        file: The TOML file (default: the one ``THALWEG_CONFIG`` names, else none).

    Returns:
        The configuration and its base directory (the file's, else the working directory).
    """
    file = file or os.environ.get(CONFIG_ENV) or None
    config = PipelineConfig.load(file)
    return config, (Path(file).resolve().parent if file else Path.cwd())


def _flow() -> object:
    config, base = load_pipeline()
    return build_pipeline(config, base_dir=base, summary=True)


flow = _flow()
