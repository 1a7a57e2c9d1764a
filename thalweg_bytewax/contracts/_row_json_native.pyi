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
