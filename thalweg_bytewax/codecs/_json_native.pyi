from typing import Any

import numpy as np
from typing_extensions import Buffer

class Decoder:
    def __init__(self, plan: tuple[Any, ...], prefix: bytes) -> None: ...
    def decode(
        self, data: Buffer, offsets: Buffer | np.ndarray[Any, Any], /
    ) -> tuple[bytes, bytes, tuple[Any, ...]]: ...
