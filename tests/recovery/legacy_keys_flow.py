"""The previous release's flow at its fixed root, as a module attribute.

``python -m bytewax.run tests.recovery.legacy_keys_flow:flow`` and ``thalweg recovery
migrate-keys tests.recovery.legacy_keys_flow:flow`` take a flow by name; the flow reads
its contract from the root, so import this module after the root is in place.
"""

from __future__ import annotations

from tests.recovery import previous_release_flow as prf

flow = prf.build_flow(prf.layout())
