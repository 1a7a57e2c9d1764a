"""Build of the native JSON reader; everything else is configured in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # Optional: without a C compiler the JSON codec falls back to pyarrow.json
        # (slower) and says so in a warning.
        Extension(
            "thalweg_bytewax.codecs._json_native",
            ["thalweg_bytewax/codecs/_json_native.c"],
            optional=True,
        )
    ]
)
