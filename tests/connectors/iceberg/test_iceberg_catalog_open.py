"""Opening one fresh local Iceberg warehouse from several workers at once.

Every worker's sink partition opens the catalog when it is built, all at the same
moment on a fresh warehouse; pyiceberg's SQL catalog creates its tables on open, and
two concurrent creations on one SQLite file race ("table iceberg_tables already
exists"). The flow must start anyway.
"""

from __future__ import annotations

import threading
from pathlib import Path

from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig


def test_workers_opening_a_fresh_warehouse_at_once_all_succeed(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    for attempt in range(5):
        config = IcebergCatalogConfig(warehouse=str(tmp_path / f"warehouse-{attempt}"))
        start = threading.Barrier(8)

        def open_it(config: IcebergCatalogConfig = config, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                config.load()
            except BaseException as exc:  # collected, asserted below
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failures, [str(f) for f in failures]
