"""JSON codec: one map of many keys, distinct and with one repeated key, per reader.

The native reader compares the first 16 keys of a map pairwise and sorts a larger map's
keys once it closes, so a map of n keys costs n log n (pairwise it was n squared: about a
minute for 200,000 keys). A map that repeats a key goes the per-value way. Run:

    python benchmarks/json_map_keys.py --keys 200000 400000
"""

from __future__ import annotations

import argparse
import json
import time

import orjson

from thalweg_bytewax.codecs._json_fast import NATIVE
from thalweg_bytewax.codecs.json import JsonCodec, JsonEngine

SCHEMA = {
    "type": "object",
    "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}},
}


def _seconds(codec: JsonCodec, payload: bytes, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        codec.decode_batch([payload])
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    """Print one JSON line per (reader, keys) with the best of ``--repeat`` decode times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines: tuple[JsonEngine, ...] = ("native", "pyarrow") if NATIVE else ("pyarrow",)
    for engine in engines:
        for n in args.keys:
            big = orjson.dumps({"m": {f"key{i:07d}": i for i in range(n)}})
            repeated = big[:-2] + b', "key0000001": 0}}'
            codec = JsonCodec(SCHEMA, engine=engine)
            row = {
                "engine": engine,
                "keys": n,
                "distinct_s": round(_seconds(codec, big, args.repeat), 4),
                "repeated_key_s": round(_seconds(codec, repeated, args.repeat), 4),
            }
            print(json.dumps(row))


if __name__ == "__main__":
    main()
