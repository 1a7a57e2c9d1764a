r"""Enforce an ODCS contract: clean rows to a lane, rejects to a DLQ with reason codes, an audit.

Payments arrive as JSON (keyed RawBatches, as ``KafkaSource`` emits them).
``twg.decode`` decodes them to the contract's schema (decimals as exact text; a payload
that does not fit is a ``decode`` reject); ``twg.validate`` judges every row in
``quarantine`` mode. Clean rows, the DLQ (decode and contract rejects under one
directory) and the audit trail go to exactly-once Parquet lanes; DuckDB then reads the
DLQ and counts rejects by reason and rule. Run it::

    python docs/examples/howto_contract.py [WORKDIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import bytewax.operators as op
import duckdb
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, run_main

import thalweg_bytewax.operators as twg
from thalweg_bytewax.codecs import JsonCodec
from thalweg_bytewax.connectors.parquet import ParquetSink
from thalweg_bytewax.contracts import load_contract
from thalweg_bytewax.records.batches import raw_batch_from_columns

CONTRACT = Path(__file__).with_name("howto_payments.odcs.yaml")

PAYMENTS = [
    b'{"payment_id": "p-1", "method": "card", "amount": "12.50", "currency": "EUR"}',
    b'{"payment_id": "p-2", "method": "cash", "amount": "3", "currency": "EUR"}',  # not in enum
    b'{"payment_id": "p-3", "method": "wallet", "amount": "-4", "currency": "USD"}',  # below 0
    b'{"payment_id": "p-4", "method": "transfer", "amount": "99", "currency": "eur"}',  # pattern
    b'{"payment_id": "p-5", "method": "card", "amount": "0", "currency": "GBP"}',  # SQL rule
    b'{"payment_id": "p-6", "method": "card", "amount": "1.25"}',  # no currency: decode
    b'{"payment_id": "p-7", "method": "card", "amount": "1.0", "currency": "CHF"',  # cut short
    b'{"payment_id": "p-8", "method": "transfer", "amount": "250", "currency": "SEK"}',
]


def build_flow(work: Path) -> Dataflow:
    """JSON payments -> decode -> validate -> clean, DLQ and audit lanes."""
    contract = load_contract(CONTRACT)
    raw = raw_batch_from_columns(
        topic="payments",
        partition=0,
        offsets=range(len(PAYMENTS)),
        keys=[b"k"] * len(PAYMENTS),
        values=PAYMENTS,
    )
    flow = Dataflow("payments_contract")
    batches = op.input("in", flow, TestingSource([("payments:0", raw)]))
    decoded = twg.decode("decode", batches, JsonCodec(schema=contract))
    out = twg.validate("validate", decoded.ok, contract, mode="quarantine")
    op.output("clean", out.clean, ParquetSink(work / "payments"))
    # One sink per stream (a sink takes each source partition in offset order); the two
    # directories read back as one DLQ dataset.
    op.output("dlq_decode", decoded.rejected, ParquetSink(work / "dlq" / "decode"))
    op.output("dlq_contract", out.rejected, ParquetSink(work / "dlq" / "contract"))
    op.output("audit", out.audit, ParquetSink(work / "audit"))
    return flow


def main(work: Path) -> None:
    """Run the flow, then read the lanes with DuckDB."""
    run_main(build_flow(work))
    db = duckdb.connect()
    clean = db.execute(f"SELECT payment_id FROM read_parquet('{work}/payments/**/*.parquet')")
    print("clean:", sorted(r[0] for r in clean.fetchall()))
    rejects = db.execute(
        f"""
        SELECT _twg_source_offset AS "offset", reason,
               list_transform(rules, lambda r: split_part(r, '@', 1)) AS rules  -- name@version
        FROM read_parquet('{work}/dlq/**/*.parquet') ORDER BY "offset"
        """
    )
    for offset, reason, rules in rejects.fetchall():
        print(f"dlq: offset {offset} {reason} {','.join(rules) or '-'}")
    by_reason = db.execute(
        f"SELECT reason, count(*) FROM read_parquet('{work}/dlq/**/*.parquet') GROUP BY ALL"
    )
    print("dlq by reason:", sorted(by_reason.fetchall()))
    audit = db.execute(
        f"""
        SELECT verdict, count(*) FROM read_parquet('{work}/audit/**/*.parquet')
        GROUP BY verdict ORDER BY verdict
        """
    )
    print("audit:", audit.fetchall())


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
