"""OffsetCoverage against a naive set model: union-merge, membership, gaps, persistence."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax.coverage import OffsetCoverage, find_replay_conflict, replacement_verdicts
from thalweg_bytewax.errors import ConfigError
from thalweg_bytewax.records.metadata import MetadataColumns

LIMIT = 200
offsets = st.integers(0, LIMIT)


@st.composite
def spans(draw: st.DrawFn) -> tuple[int, int]:
    first = draw(offsets)
    return first, draw(st.integers(first, min(first + 40, LIMIT)))


span_lists = st.lists(spans(), max_size=8)
coverages = span_lists.map(OffsetCoverage)


def model(cov: OffsetCoverage) -> set[int]:
    return {o for lo, hi in cov.spans for o in range(lo, hi + 1)}


def model_of(span_list: list[tuple[int, int]]) -> set[int]:
    return {o for lo, hi in span_list for o in range(lo, hi + 1)}


def runs(values: set[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers, in order."""
    out: list[tuple[int, int]] = []
    for v in sorted(values):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


@given(span_lists)
def test_spans_are_the_maximal_runs_of_the_covered_set(span_list: list[tuple[int, int]]) -> None:
    cov = OffsetCoverage(span_list)
    assert model(cov) == model_of(span_list)
    assert list(cov.spans) == runs(model_of(span_list))  # sorted, disjoint, non-adjacent
    assert cov.size == len(model_of(span_list))


@given(coverages, spans())
def test_union_with_one_span_is_the_union_of_the_sets(
    cov: OffsetCoverage, span: tuple[int, int]
) -> None:
    # one span at, past or before the last one: the once-a-batch shortcut and the rest
    merged = cov.union(OffsetCoverage([span]))
    assert model(merged) == model(cov) | model_of([span])
    assert list(merged.spans) == runs(model(merged))
    assert merged == OffsetCoverage([*cov.spans, span])


@given(coverages, coverages)
def test_union_is_commutative(a: OffsetCoverage, b: OffsetCoverage) -> None:
    assert a.union(b) == b.union(a)


@given(coverages, coverages, coverages)
def test_union_is_associative(a: OffsetCoverage, b: OffsetCoverage, c: OffsetCoverage) -> None:
    assert a.union(b).union(c) == a.union(b.union(c))


@given(coverages, coverages)
def test_union_is_idempotent_and_never_last_write_wins(
    a: OffsetCoverage, b: OffsetCoverage
) -> None:
    merged = a | b
    assert merged | b == merged and merged | a == merged and a | a == a
    # Nothing either side held is lost, whichever is merged last.
    assert model(merged) == model(a) | model(b)
    assert model(a) <= model(merged) and model(b) <= model(merged)


@given(coverages, spans())
def test_add_is_union_with_one_span(cov: OffsetCoverage, span: tuple[int, int]) -> None:
    assert cov.add(*span) == cov.union(OffsetCoverage([span]))
    assert model(cov.add(*span)) == model(cov) | model_of([span])


@given(coverages, st.lists(st.integers(-5, LIMIT + 5), max_size=50))
def test_covers_and_the_vectorised_mask_agree_with_the_model(
    cov: OffsetCoverage, probe: list[int]
) -> None:
    covered = model(cov)
    expected = [o in covered for o in probe]
    assert [cov.covers(o) for o in probe] == expected
    column = pa.array(probe, pa.int64())
    assert cov.mask(column).tolist() == expected
    assert cov.mask(pa.chunked_array([column[:3], column[3:]], pa.int64())).tolist() == expected
    assert cov.mask(np.array(probe, dtype=np.int64)).tolist() == expected


@given(coverages, spans())
def test_uncovered_reports_exactly_what_is_missing(
    cov: OffsetCoverage, span: tuple[int, int]
) -> None:
    first, last = span
    missing = set(range(first, last + 1)) - model(cov)
    assert cov.uncovered(first, last) == runs(missing)
    assert cov.overlaps(first, last) == (len(missing) < last - first + 1)


@given(coverages)
def test_gaps_are_exactly_the_holes_between_first_and_last(cov: OffsetCoverage) -> None:
    if not cov:
        assert cov.gaps() == [] and cov.first is None and cov.last is None
        return
    assert cov.first is not None and cov.last is not None
    holes = set(range(cov.first, cov.last + 1)) - model(cov)
    assert cov.gaps() == runs(holes)
    assert cov.gaps() == cov.uncovered(cov.first, cov.last)


@given(coverages)
def test_plain_lists_round_trip(cov: OffsetCoverage) -> None:
    data = cov.to_list()
    assert all(type(x) is int for pair in data for x in pair)
    assert OffsetCoverage.from_list(data) == cov
    assert hash(OffsetCoverage.from_list(data)) == hash(cov)


@pytest.mark.parametrize(
    "bad",
    [[(3, 2)], [(1.5, 2)], [(True, 2)], [("0", 1)]],
)
def test_bad_spans_are_config_errors(bad: list[tuple[object, object]]) -> None:
    with pytest.raises(ConfigError) as info:
        OffsetCoverage(bad)  # type: ignore[arg-type]
    text = str(info.value)
    assert text.startswith("offset coverage:") and not text.endswith(".")


@pytest.mark.parametrize("bad", ["01", [[1]], [[1, 2, 3]], 7, [[0, "x"]]])
def test_bad_lists_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        OffsetCoverage.from_list(bad)  # type: ignore[arg-type]


def test_a_null_offset_is_refused_by_the_mask() -> None:
    with pytest.raises(ConfigError, match="no nulls"):
        OffsetCoverage([(0, 3)]).mask(pa.array([1, None], pa.int64()))


def ids(values: list[int]) -> pa.Array:
    return pa.array([v.to_bytes(16, "big") for v in values], pa.binary(16))


@given(
    st.dictionaries(st.integers(0, 30), st.integers(0, 3), max_size=20),
    st.dictionaries(st.integers(0, 30), st.integers(0, 3), max_size=20),
)
def test_replay_conflicts_agree_with_a_set_model(
    held: dict[int, int], replay: dict[int, int]
) -> None:
    pairs = set(held.items())
    expected = sorted(o for o, r in replay.items() if o in held and (o, r) not in pairs)
    got = find_replay_conflict(
        pa.array(list(replay), pa.int64()),
        ids(list(replay.values())),
        pa.array(list(held), pa.int64()),
        ids(list(held.values())),
    )
    assert got == (expected[0] if expected else None)


def test_an_offset_the_target_never_held_is_no_conflict() -> None:
    # A sparse lane: the first run did not write offset 5 here; skipping it is right.
    got = find_replay_conflict(
        pa.array([4, 5], pa.int64()), ids([4, 9]), pa.array([4], pa.int64()), ids([4])
    )
    assert got is None


def test_rows_without_a_record_id_are_not_compared() -> None:
    # A lane whose rows carry a null record id (rows of a source without one) replays
    # them: nothing can be verified, and that is no conflict.
    null_ids = pa.array([None, None], pa.binary(16))
    offsets = pa.array([4, 5], pa.int64())
    assert find_replay_conflict(offsets, null_ids, offsets, null_ids) is None
    assert find_replay_conflict(offsets, ids([4, 5]), offsets, null_ids) is None
    assert find_replay_conflict(offsets, null_ids, offsets, ids([4, 5])) is None
    # Rows that do carry ids on both sides are still compared.
    mixed = pa.array([None, (9).to_bytes(16, "big")], pa.binary(16))
    assert find_replay_conflict(offsets, mixed, offsets, ids([4, 5])) == 5


held_rows = st.tuples(
    st.integers(0, 4),  # the replayed row whose key it has (rows beyond n are dropped)
    st.sampled_from(["t", "u"]),
    st.sampled_from([0, 1]),
    st.none() | st.integers(0, 30),
)


@given(st.lists(st.integers(0, 30), min_size=1, max_size=5), st.lists(held_rows, max_size=12))
def test_replacement_verdicts_match_the_per_row_rule(
    replayed: list[int], held: list[tuple[int, str, int, int | None]]
) -> None:
    cols = MetadataColumns()
    held = [h for h in held if h[0] < len(replayed)]
    table = pa.table(
        {
            cols.source_topic: pa.array([h[1] for h in held], pa.string()),
            cols.source_partition: pa.array([h[2] for h in held], pa.int32()),
            cols.source_offset: pa.array([h[3] for h in held], pa.int64()),
        }
    )
    asked = pa.array([h[0] for h in held], pa.int64())
    got = replacement_verdicts(pa.array(replayed, pa.int64()), asked, table, cols, "t", 0)

    def expected(i: int) -> int:
        # A later row of this source replaced it; else another source's (or an
        # unordered) row leaves it unknown; else the target never got it.
        mine = [h for h in held if h[0] == i]
        if any(h[1:3] == ("t", 0) and h[3] is not None and h[3] > replayed[i] for h in mine):
            return 1
        if any(h[1:3] != ("t", 0) or h[3] is None for h in mine):
            return -1
        return 0

    assert got.tolist() == [expected(i) for i in range(len(replayed))]


def test_checked_passes_a_coverage_and_names_the_caller_for_anything_else() -> None:
    cov = OffsetCoverage([(0, 9)])
    assert OffsetCoverage.checked(cov, "raw lane source: offsets of `t:0`") is cov
    with pytest.raises(ConfigError) as info:
        OffsetCoverage.checked([(0, 9)], "raw lane source: offsets of `t:0`")
    assert str(info.value) == (
        "raw lane source: offsets of `t:0` expected an OffsetCoverage; got list"
    )
