"""Private: the opcodes of an Avro walk program, as the C walk's ``enum Op`` numbers them.

:mod:`._avro_walk` compiles a schema to a program of these words; the C walk
(``_avro_native``) and the Python walk (:mod:`._avro_walk_py`) read it. ``RANGED`` is a
value whose range the program carries (a date, time or timestamp).
"""

from __future__ import annotations

__all__ = [
    "ARRAY",
    "BOOL",
    "BYTES",
    "DECIMAL",
    "DOUBLE",
    "ENUM",
    "FDECIMAL",
    "FIXED",
    "FLOAT",
    "INT",
    "LONG",
    "MAP",
    "NULL",
    "RANGED",
    "RECORD",
    "STRING",
    "UNION",
    "UUID",
]

(
    NULL,
    BOOL,
    INT,
    LONG,
    FLOAT,
    DOUBLE,
    BYTES,
    STRING,
    UUID,
    FIXED,
    ENUM,
    DECIMAL,
    RECORD,
    UNION,
    ARRAY,
    MAP,
    RANGED,
    FDECIMAL,
) = range(18)
