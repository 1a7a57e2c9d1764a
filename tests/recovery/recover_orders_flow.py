"""The orders flow from Kafka, for the recover tests: full, or with its orders sink down.

``python -m tests.recovery.recover_orders_flow DATA_DIR BOOTSTRAP TOPIC RECOVERY_DIR
[--without-orders]`` runs ``flows.orders`` over ``TOPIC`` to its end (small polls, one
epoch per poll, with recovery). ``--without-orders`` runs it the way an operator keeps
ingest going while the orders target is down: the same flow minus its ``ice_orders``
output (the Iceberg ``orders`` table), so the raw lane, DLQ and audit go on and the
orders table falls behind.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from bytewax.recovery import RecoveryConfig
from bytewax.run import cli_main

from flows.orders import OrdersSettings, build_flow
from thalweg_bytewax.connectors.kafka import KafkaSource


def main() -> None:
    """Run the flow: ``main DATA_DIR BOOTSTRAP TOPIC RECOVERY_DIR [--without-orders]``."""
    data_dir, bootstrap, topic, recovery = sys.argv[1:5]
    settings = OrdersSettings(
        data_dir=Path(data_dir), bootstrap_servers=bootstrap, topic=topic, tail=False
    )
    source = KafkaSource(bootstrap, [topic], tail=False, batch_size=150)
    flow = build_flow(settings, source=source)
    if "--without-orders" in sys.argv[5:]:
        flow.substeps[:] = [s for s in flow.substeps if s.step_id != "orders.ice_orders"]
    cli_main(
        flow, epoch_interval=timedelta(0), recovery_config=RecoveryConfig(recovery)
    )


if __name__ == "__main__":
    main()
