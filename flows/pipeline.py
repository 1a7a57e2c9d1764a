"""A whole flow from one TOML file, from a checkout: ``python -m bytewax.run flows.pipeline``.

    THALWEG_CONFIG=pipeline.toml python -m bytewax.run flows.pipeline

It is :mod:`thalweg_bytewax.flows.pipeline`, which ships with the package (an
installation runs it with ``THALWEG_CONFIG=pipeline.toml thalweg run pipeline``); its
docstring says how the file and the ``THALWEG_*`` variables combine.
"""

from __future__ import annotations

from thalweg_bytewax.flows.pipeline import build_pipeline, flow, load_pipeline, pipeline_source

__all__ = ["build_pipeline", "flow", "load_pipeline", "pipeline_source"]
