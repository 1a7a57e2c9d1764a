from __future__ import annotations

from collections.abc import Iterator

import pytest

import thalweg_bytewax.codecs.json as json_codec
from thalweg_bytewax.codecs._json_fast import NATIVE


@pytest.fixture(params=["native", "pyarrow"])
def json_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs a JSON test once per columnar reader ``engine="auto"`` can pick.

    ``pyarrow`` is what an installation built without a C compiler runs.
    """
    if request.param == "native":
        assert NATIVE, "the native JSON reader is not built: pip install -e . with a C compiler"
    else:
        monkeypatch.setattr(json_codec, "NATIVE", False)
    yield request.param
