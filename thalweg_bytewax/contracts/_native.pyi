class Block:
    """Uninitialised memory from malloc with a writable buffer protocol."""

    def __init__(self, size: int) -> None: ...
    @property
    def address(self) -> int: ...
    def resize(self, size: int, /) -> None: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def rows(
    plan: tuple[object, ...],
    indices: int,
    n: int,
    start: int,
    offsets: int,
    data: int,
    capacity: int,
    /,
) -> int | None: ...
def duplicates(
    kind: int,
    n: int,
    offset: int,
    validity: int,
    b1: int,
    b2: int,
    width: int,
    out: int,
    /,
) -> None: ...
