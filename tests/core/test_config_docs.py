"""docs/configuration.md lists every setting of the orders flow, as the model defines it."""

from __future__ import annotations

import re
from pathlib import Path

from thalweg_bytewax.config import render_reference
from thalweg_bytewax.flows.orders import OrdersSettings

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
