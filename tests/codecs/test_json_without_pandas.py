"""The JSON codec's numeric columns need NumPy only: pandas is not a dependency.

Some pyarrow releases (19 and 20 among them) import pandas for
``DataType.to_pandas_dtype()``; a codec with an integer or float column must build and
decode where pandas cannot be imported, as in a plain install.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from thalweg_bytewax.codecs._json_values import numpy_dtype

NUMERIC = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32,
    pa.uint64(): np.uint64, pa.float16(): np.float16, pa.float32(): np.float32,
    pa.float64(): np.float64,
}  # fmt: skip


@pytest.mark.parametrize(("t", "expected"), NUMERIC.items(), ids=str)
def test_numpy_dtype_is_the_arrow_types_own(t: pa.DataType, expected: type) -> None:
    assert numpy_dtype(t) == np.dtype(expected)


@pytest.mark.slow
def test_the_codec_builds_and_decodes_numbers_where_pandas_cannot_be_imported() -> None:
    code = textwrap.dedent(
        """
        import importlib.abc, sys

        class NoPandas(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pandas":
                    raise ModuleNotFoundError("No module named 'pandas'")

        sys.meta_path.insert(0, NoPandas())
        import pyarrow as pa
        from thalweg_bytewax.codecs import JsonCodec

        schema = pa.schema([("id", pa.int32()), ("u", pa.uint8()), ("x", pa.float32())])
        codec = JsonCodec(schema)
        batch = codec.decode_batch([b'{"id": 7, "u": 255, "x": 1.5}']).batch
        print(batch.to_pylist())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'id': 7" in done.stdout and "'u': 255" in done.stdout, done.stdout
