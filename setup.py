"""The package list and the native extensions; everything else is in pyproject.toml."""

from setuptools import Extension, find_packages, setup

setup(
    # Every package of the distribution, found, never listed by hand. `flows/` (the
    # examples of a checkout) is not one: a top-level `flows` package in site-packages
    # would shadow a user's own.
    packages=find_packages(include=["thalweg_bytewax", "thalweg_bytewax.*"]),
    ext_modules=[
        # Optional: without a C compiler the JSON codec falls back to pyarrow.json
        # (slower) and says so in a warning.
        Extension(
            "thalweg_bytewax.codecs._json_native",
            ["thalweg_bytewax/codecs/_json_native.c"],
            depends=["thalweg_bytewax/codecs/_body_offsets.h"],
            optional=True,
        ),
        # Optional: without a C compiler the Avro fast path proves each row's bytes with
        # NumPy and Arrow compute over polars' decoded columns (the same rows accepted,
        # about twice the CPU per record); a log line says which runs.
        Extension(
            "thalweg_bytewax.codecs._avro_native",
            ["thalweg_bytewax/codecs/_avro_native.c"],
            depends=["thalweg_bytewax/codecs/_body_offsets.h"],
            optional=True,
        ),
        # Optional: without OpenSSL's headers record ids are computed with hashlib
        # (the same ids, ~3x the time per record).
        Extension(
            "thalweg_bytewax._record_ids",
            ["thalweg_bytewax/_record_ids.c"],
            libraries=["crypto"],
            optional=True,
        ),
        # Optional: a batch consume into Arrow buffers over the librdkafka bundled in
        # confluent-kafka's wheel, loaded at run time (no header or system package at
        # build time). Without it KafkaSource reads through confluent-kafka's Message
        # objects (the same RawBatches, more CPU per record) and logs which path runs.
        Extension(
            "thalweg_bytewax._kafka_native",
            ["thalweg_bytewax/_kafka_native.c"],
            optional=True,
        ),
        # Optional: without a C compiler the DLQ row JSON and messages of rejected rows
        # are built with Arrow string kernels and one-column uniqueness rules group keys
        # with Arrow (the same results, several times the CPU per rejected row); a log
        # line says which runs.
        Extension(
            "thalweg_bytewax.contracts._native",
            ["thalweg_bytewax/contracts/_native.c"],
            optional=True,
        ),
    ],
)
