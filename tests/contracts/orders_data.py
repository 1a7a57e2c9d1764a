"""Sample orders as decoded keyed batches (payload columns + locator metadata)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from thalweg_bytewax.contracts import ContractSpec, load_contract
from thalweg_bytewax.dev.samples import encode_order_avro, sample_orders
from thalweg_bytewax.records.ids import record_ids
from thalweg_bytewax.records.metadata import MetadataColumns

ROOT = Path(__file__).resolve().parents[2]
ORDERS_CONTRACT = ROOT / "thalweg_bytewax" / "flows" / "contracts" / "orders.odcs.yaml"
COLS = MetadataColumns()


@cache
def orders_contract() -> ContractSpec:
    """The bundled orders contract, loaded once per process (a ``ContractSpec`` is frozen)."""
    return load_contract(ORDERS_CONTRACT)


def orders(n: int, *, seed: int = 7) -> list[dict[str, Any]]:
    return list(sample_orders(n, seed=seed))


def decoded_schema(contract: ContractSpec) -> pa.Schema:
    # A decoder produces nullable fields; the contract's not-null is checked by rules.
    payload = [pa.field(f.name, f.type) for f in contract.arrow_schema()]
    meta = [COLS.raw_schema.field(c) for c in COLS.locator_columns()]
    return pa.schema(payload + meta)


def orders_batch(
    rows: list[dict[str, Any]],
    *,
    topic: str = "orders",
    partition: int = 0,
    first_offset: int = 0,
    contract: ContractSpec | None = None,
) -> pa.RecordBatch:
    """A decoded batch of ``rows`` at consecutive offsets, with record ids."""
    contract = contract or orders_contract()
    offsets = list(range(first_offset, first_offset + len(rows)))
    values = [encode_order_avro(r) if _encodable(r) else repr(r).encode() for r in rows]
    data = {
        **{k: [r.get(k) for r in rows] for k in contract.arrow_schema().names},
        COLS.source_topic: [topic] * len(rows),
        COLS.source_partition: [partition] * len(rows),
        COLS.source_offset: offsets,
        COLS.record_id: record_ids(None, topic, partition, offsets, values),
    }
    return pa.RecordBatch.from_pydict(data, schema=decoded_schema(contract))


def _encodable(row: dict[str, Any]) -> bool:
    try:
        encode_order_avro(row)
    except (ValueError, TypeError, KeyError, AttributeError):
        return False
    return True
