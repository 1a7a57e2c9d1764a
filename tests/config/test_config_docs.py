"""docs/configuration.md lists every setting of the orders flow, as the model defines it."""

from __future__ import annotations

import re
from pathlib import Path

from thalweg_bytewax.config import render_reference
from thalweg_bytewax.flows.orders import OrdersSettings
from thalweg_bytewax.pipeline import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"


def test_the_settings_reference_is_the_one_generated_from_the_model() -> None:
    text = DOC.read_text()
    block = re.search(
        r"<!-- settings-reference: thalweg_bytewax.flows.orders:OrdersSettings -->\n"
        r"(.*?)<!-- /settings-reference -->",
        text,
        flags=re.DOTALL,
    )
    assert block is not None
    # Defaults under the checkout (the bundled contract) are shown relative to it.
    wanted = render_reference(OrdersSettings).replace(str(REPO) + "/", "")
    assert block.group(1) == wanted, "regenerate it with render_reference(OrdersSettings)"
    for name in OrdersSettings.model_fields:
        assert f"| `{name}` |" in block.group(1)


def test_every_orders_setting_has_a_description_for_init_and_the_docs() -> None:
    missing = [n for n, f in OrdersSettings.model_fields.items() if not f.description]
    assert not missing


def test_the_pipeline_key_reference_is_the_one_generated_from_the_model() -> None:
    text = (REPO / "docs" / "pipeline.md").read_text()
    block = re.search(
        r"<!-- settings-reference: thalweg_bytewax.pipeline:PipelineConfig -->\n"
        r"(.*?)<!-- /settings-reference -->",
        text,
        flags=re.DOTALL,
    )
    assert block is not None
    assert block.group(1) == render_reference(PipelineConfig), (
        "regenerate it with render_reference(PipelineConfig)"
    )
    # every section and every sink key, the items of a table of many included
    for key in ("source.kind", "sinks.<name>.kind", "sinks.<name>.librdkafka", "windows[].name"):
        assert f"| `{key}` |" in block.group(1)
