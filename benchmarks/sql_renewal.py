"""SQL sessions: what DuckDB keeps of past joins, and what renewing the database costs.

Runs the orders flow's currency join (a ``LEFT JOIN`` on a ``VALUES`` table) as a
prepared query over a small batch, many times on one session: with the database renewed
every ``RENEW_AFTER_RUNS`` (the default, 1,024) and never renewed. Per variant it prints
the growth of glibc's heap in use (``mallinfo2``) and of RSS over the runs after a warm-up,
and the CPU a run (``process_time``: DuckDB's threads included). The variants alternate,
and the order reverses every round. Run:

    python benchmarks/sql_renewal.py --runs 30000 --rounds 3
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).parent))

import argparse
import ctypes
import time

import pyarrow as pa
from _harness import rss_mb  # noqa: E402

from thalweg_bytewax.sql import engine
from thalweg_bytewax.sql.engine import SqlSession

JOIN = (
    "WITH rates(currency, eur_rate) AS (VALUES ('EUR', 1.0000), ('USD', 0.9200), "
    "('GBP', 1.1700), ('CHF', 1.0500), ('SEK', 0.0880)) "
    "SELECT input.*, CAST(rates.eur_rate AS DECIMAL(10, 4)) AS eur_rate, "
    "CAST(input.total * rates.eur_rate AS DECIMAL(14, 2)) AS amount_eur "
    "FROM input LEFT JOIN rates ON input.currency = rates.currency"
)
NEVER = 2**62


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2


def _heap_mb() -> float:
    info = _LIBC.mallinfo2()
    return (info.uordblks + info.hblkhd) / 2**20


def run(renew_after: int, runs: int) -> dict[str, float]:
    """``runs`` runs of the join on a new session; heap and RSS growth, CPU a run."""
    engine.RENEW_AFTER_RUNS = renew_after
    batch = pa.record_batch(
        {
            "order_id": list(range(50)),
            "currency": [("EUR", "USD", "GBP", "CHF", "SEK")[i % 5] for i in range(50)],
            "total": [float(10 + i) for i in range(50)],
        }
    )
    session = SqlSession(None)
    prepared = session.prepare("input", JOIN)
    for _ in range(1100):  # warm up, past the first renewal
        prepared.run(batch)
    heap, rss, cpu = _heap_mb(), rss_mb(), time.process_time()
    for _ in range(runs):
        prepared.run(batch)
    return {
        "heap_mb": _heap_mb() - heap,
        "rss_mb": rss_mb() - rss,
        "cpu_us": (time.process_time() - cpu) / runs * 1e6,
    }


def main() -> None:
    """Alternate the variants and print one line a run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    default = engine.RENEW_AFTER_RUNS
    variants = [(f"renewed every {default}", default), ("never renewed", NEVER)]
    for r in range(args.rounds):
        for name, renew in variants if r % 2 == 0 else variants[::-1]:
            got = run(renew, args.runs)
            print(
                f"round {r} {name:>20}: heap +{got['heap_mb']:.1f} MB, RSS +{got['rss_mb']:.1f} MB"
                f", {got['cpu_us']:.0f} us CPU a run",
                flush=True,
            )


if __name__ == "__main__":
    main()
