from typing import Any

import numpy as np
from typing_extensions import Buffer

def record_ids(
    prefix: bytes,
    offsets: Buffer | np.ndarray[Any, Any],
    value_offsets: Buffer | np.ndarray[Any, Any],
    value_data: Buffer,
    valid: Buffer | np.ndarray[Any, Any],
    /,
) -> bytes: ...
