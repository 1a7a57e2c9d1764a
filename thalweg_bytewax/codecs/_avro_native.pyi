from typing import Any

import numpy as np
from typing_extensions import Buffer

def walk(
    program: Buffer,
    data: Buffer,
    offsets: Buffer | np.ndarray[Any, Any],
    canonical: bool = True,
) -> tuple[bytes, bytes, int, int, bytes]: ...
def framed_block(
    program: Buffer,
    data: Buffer,
    offsets: Buffer | np.ndarray[Any, Any],
    schema_id: int,
    head: Buffer,
    tail: Buffer,
) -> bytes | None: ...
