"""The SQL functions every thalweg DuckDB session ships with, as SQL macros.

Macros rather than Python UDFs: DuckDB inlines them into the plan, so they run
vectorised at engine speed with no per-row call back into Python. DuckDB's built-in
``to_json(any)`` already serialises every type (structs, lists, maps, timestamps,
decimals), so it is not redefined; the functions here are what it lacks:

* ``millis_to_ts_utc(ms)`` -> ``TIMESTAMPTZ`` and ``millis_to_ts_ntz(ms)`` -> ``TIMESTAMP``:
  epoch milliseconds to a timestamp whose zone tag the name states (decode learnings §5:
  two helpers differing only in a hidden tz tag cause outages). Use ``_ntz`` for
  time-zone-naive targets.
* ``decode_avro_decimal(bytes, scale)`` -> ``DECIMAL(38, 18)``: an Avro ``decimal``
  (big-endian two's complement, up to 16 bytes) from ``BLOB`` or from its base64 text
  (what a JSON hop leaves behind, decode learnings §6). Exact for scale <= 18 and up to
  20 integer digits; cast the result to the column's own type.
* ``header(headers, name)`` -> ``BLOB``: the value of the last header called ``name`` in
  a ``_twg_source_headers`` list (Kafka's ``lastHeader``), NULL when absent.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FUNCTION_NAMES", "install_functions"]

_MACROS: tuple[tuple[str, str], ...] = (
    ("millis_to_ts_utc", "(ms) AS make_timestamptz(CAST(ms AS BIGINT) * 1000)"),
    ("millis_to_ts_ntz", "(ms) AS make_timestamp(CAST(ms AS BIGINT) * 1000)"),
    # Input as BLOB: base64 text (VARCHAR) is decoded first; a BLOB passes unchanged.
    (
        "__twg_blob",
        "(x) AS CASE WHEN typeof(x) = 'VARCHAR' THEN from_base64(CAST(x AS VARCHAR)) "
        "ELSE CAST(x AS BLOB) END",
    ),
    # Two's complement over n bytes: negative when the top bit is set, then
    # -(~u + 1) with ~ taken over n bytes (fits UHUGEINT for n <= 16).
    (
        "__twg_unscaled",
        "(b) AS CASE WHEN octet_length(b) = 0 THEN NULL "
        "WHEN CAST('0x' || left(hex(b), 2) AS INTEGER) >= 128 "
        "THEN -CAST(xor(CAST('0x' || hex(b) AS UHUGEINT), "
        "CAST('0x' || repeat('F', 2 * octet_length(b)) AS UHUGEINT)) + 1 AS HUGEINT) "
        "ELSE CAST(CAST('0x' || hex(b) AS UHUGEINT) AS HUGEINT) END",
    ),
    (
        "decode_avro_decimal",
        "(x, scale) AS CAST(CAST(__twg_unscaled(__twg_blob(x)) * "
        "CAST(power(10, 18 - scale) AS HUGEINT) AS DECIMAL(38, 0)) AS DECIMAL(38, 0)) "
        "* CAST(0.000000000000000001 AS DECIMAL(38, 18))",
    ),
    (
        "header",
        "(headers, name) AS list_filter(headers, lambda h: h.key = name)[-1].value",
    ),
)

FUNCTION_NAMES: tuple[str, ...] = tuple(n for n, _ in _MACROS if not n.startswith("__"))
"""The public SQL function names this module defines."""


def install_functions(con: Any) -> None:
    """Create the macros on a DuckDB connection (before its configuration is locked)."""
    for name, body in _MACROS:
        con.execute(f"CREATE OR REPLACE MACRO {name}{body}")
