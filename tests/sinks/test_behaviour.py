"""What a user relies on from every sink: Parquet, Iceberg, PostgreSQL, Arrow IPC, Kafka, Flight.

Each case runs on every :class:`~tests.sinks.targets.SinkTarget` (``table_sink``); a case
marked ``capability("...")`` runs only on the sinks that have it by design (the Parquet
lane has no write-boundary conversions or identifier rules), so none is skipped. Partitions are driven
as Bytewax would: ``write_batch`` during an epoch, ``snapshot`` at its close, a new
partition on restart. Replays after a SIGKILL are in ``test_crash.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.sinks.targets import C, SinkTarget, orders
from thalweg_bytewax.errors import ConfigError, SinkTerminalError, ThalwegError


def ids_of(*batches: pa.RecordBatch) -> list[bytes]:
    return sorted(rid for b in batches for rid in b.column(C.record_id).to_pylist())


def commit_epochs(table_sink: SinkTarget, *epochs: Sequence[int]) -> list[Any]:
    """One epoch per offset list of `orders:0`, committed by one partition; each snapshot."""
    p = table_sink.part(table_sink.make())
    states = []
    for offsets in epochs:
        p.write_batch([orders(0, offsets)])
        states.append(p.snapshot())
    p.close()
    return states


def test_duplicate_batches_after_a_restart_land_once(table_sink: SinkTarget) -> None:
    first = table_sink.part(table_sink.make())
    first.write_batch([orders(0, range(10)), orders(1, range(5))])
    assert table_sink.offsets(first.snapshot()) == {"orders:0": 10, "orders:1": 5}
    first.close()
    # A restart whose recovery store lags: the same batches again, other boundaries.
    again = table_sink.part(table_sink.make())
    again.write_batch([orders(0, range(5, 15)), orders(1, range(5))])
    again.write_batch([orders(1, range(5, 8))])
    assert again.stats.rows_skipped_replay == 10
    assert table_sink.offsets(again.snapshot()) == {"orders:0": 15, "orders:1": 8}
    assert table_sink.record_ids() == ids_of(orders(0, range(15)), orders(1, range(8)))


def test_a_row_held_across_a_restart_below_the_committed_offsets_is_refused(
    table_sink: SinkTarget,
) -> None:
    # Offsets 0-4 and 6-9 are committed; a step before the sink still holds offset 5.
    states = commit_epochs(table_sink, range(5), range(6, 10))
    assert [table_sink.offsets(s) for s in states] == [{"orders:0": 5}, {"orders:0": 10}]
    before = table_sink.record_ids()
    # Resumed from that state, the held row comes first: no replay, and not in the target.
    again = table_sink.part(table_sink.make(), {"orders:0": 10})
    with pytest.raises(ConfigError, match=r"`orders:0` from offset 5 .* arrived after a resume"):
        again.write_batch([orders(0, [5])])
    assert again.stats.rows_skipped_replay == 0
    assert table_sink.record_ids() == before
    # Rows below the resumed state that the target holds are replays, skipped as before.
    replayed = table_sink.part(table_sink.make(), {"orders:0": 10})
    replayed.write_batch([orders(0, range(7, 12))])
    assert replayed.stats.rows_skipped_replay == 3  # noqa: PLR2004
    replayed.snapshot()
    assert table_sink.record_ids() == ids_of(orders(0, range(5)), orders(0, range(6, 12)))


def test_a_row_missing_from_the_commit_the_recovery_store_lost_is_named_when_skipped(
    table_sink: SinkTarget, caplog: pytest.LogCaptureFixture
) -> None:
    # The second epoch commits 5 and 7-9 without 6 (held upstream, or rejected by a
    # time-dependent rule); the recovery store never records that epoch.
    first = commit_epochs(table_sink, range(5), [5, 7, 8, 9])[0]
    assert table_sink.offsets(first) == {"orders:0": 5}
    before = table_sink.record_ids()
    again = table_sink.part(table_sink.make(), first)
    again.write_batch([orders(0, [5]), orders(0, [6, 7])])
    if table_sink.fills_gaps:  # it knows 6 is not there: written, the others skipped
        assert again.stats.rows_skipped_replay == 2  # noqa: PLR2004
        again.snapshot()
        assert table_sink.record_ids() == ids_of(orders(0, range(10)))
        return
    assert "1 rows of `orders:0` at offsets 6-6 arrived after a resume" in caplog.text
    assert again.stats.rows_skipped_replay == 3  # noqa: PLR2004
    again.snapshot()
    assert table_sink.record_ids() == before


def test_a_duplicate_batch_within_a_run_is_refused_and_its_epoch_never_lands(
    table_sink: SinkTarget,
) -> None:
    p = table_sink.part(table_sink.make())
    p.write_batch([orders(0, range(3))])
    p.snapshot()
    before = table_sink.committed()
    p.write_batch([orders(0, range(3, 6))])
    with pytest.raises(ConfigError, match=r"`orders:0` arrived out of offset order"):
        p.write_batch([orders(0, range(3, 6))])
    with pytest.raises(SinkTerminalError, match="after a failed write"):
        p.snapshot()
    if table_sink.atomic_epochs:
        assert table_sink.committed() == before
        assert table_sink.record_ids() == ids_of(orders(0, range(3)))
    else:  # produced as written: what reached the topic, the restart's replay skips
        again = table_sink.part(table_sink.make())
        again.write_batch([orders(0, range(3, 6))])
        again.snapshot()
    held = range(3) if table_sink.atomic_epochs else range(6)
    assert table_sink.record_ids() == ids_of(orders(0, held))


def test_a_replay_of_other_records_at_held_offsets_is_refused(table_sink: SinkTarget) -> None:
    first = table_sink.part(table_sink.make())
    first.write_batch([orders(0, range(5))])
    first.snapshot()
    again = table_sink.part(table_sink.make())
    with pytest.raises(SinkTerminalError, match=r"holds a different record at offset 0"):
        again.write_batch([orders(0, range(5), tag="recreated")])
    assert table_sink.record_ids() == ids_of(orders(0, range(5)))


@pytest.mark.capability("evolves")
def test_a_new_field_mid_stream_becomes_a_column_with_its_comment(table_sink: SinkTarget) -> None:
    p = table_sink.part(table_sink.make(comments={"coupon": "Discount code used at checkout"}))
    p.write_batch([orders(0, [0, 1])])
    p.snapshot()
    assert "coupon" not in table_sink.columns()
    later = orders(0, [2, 3], extra={"coupon": pa.array(["A", None])})
    p.write_batch([later])
    p.snapshot()
    assert "coupon" in table_sink.columns()
    if table_sink.comments:
        assert table_sink.comment("coupon") == "Discount code used at checkout"
        assert table_sink.comment(C.source_offset)  # the built-in description of `_twg_`
    got = table_sink.read().sort_by(C.source_offset)
    assert got.column("coupon").to_pylist() == [None, None, "A", None]
    assert sorted(got.column(C.record_id).to_pylist()) == ids_of(orders(0, [0, 1]), later)


@pytest.mark.capability("evolves")
def test_an_incompatible_change_is_refused_naming_table_column_and_types(
    table_sink: SinkTarget,
) -> None:
    p = table_sink.part(table_sink.make())
    p.write_batch([orders(0, [0])])
    p.snapshot()
    old = table_sink.columns()["qty"]
    before = table_sink.committed()
    q = table_sink.part(table_sink.make())
    with pytest.raises(ThalwegError) as refused:
        q.write_batch([orders(0, [1, 2], extra={"qty": pa.array(["x", "y"])})])
    text = str(refused.value)
    new = {"postgres": "text", "iceberg": "string", "parquet": "string"}[table_sink.name]
    assert f"`{table_sink.target}`" in text and "column `qty`" in text
    assert f"is `{old}`" in text and f"got `{new}`" in text, text
    assert q.failed
    with pytest.raises(SinkTerminalError):
        q.snapshot()
    assert table_sink.committed() == before
    assert table_sink.columns()["qty"] == old
    assert table_sink.record_ids() == ids_of(orders(0, [0]))


@pytest.mark.capability("checks_types")
def test_a_type_mismatch_at_the_write_boundary_is_refused_never_a_silent_null(
    table_sink: SinkTarget,
) -> None:
    p = table_sink.part(table_sink.make())
    p.write_batch([orders(0, [0])])
    p.snapshot()
    before = table_sink.committed()
    # Zone-less times into a column of instants: which zone they meant is unknown.
    naive = pa.array([1_700_000_000_000_000], pa.timestamp("us"))
    q = table_sink.part(table_sink.make())
    with pytest.raises(ThalwegError, match=r"column `created_at`.*conversions=") as refused:
        q.write_batch([orders(0, [1], extra={"created_at": naive})])
    assert f"`{table_sink.target}`" in str(refused.value)
    assert table_sink.committed() == before
    got = table_sink.read()
    assert got.num_rows == 1 and got.column("created_at").null_count == 0


HOSTILE = ['"; DROP TABLE x; --', 'weird"col', "größe_ü", "a" * 63]
"""Column names that need quoting (or a strict refusal); the last is 63 bytes, the limit."""


@pytest.mark.capability("identifiers")
@pytest.mark.parametrize("name", HOSTILE[:3])
def test_hostile_identifiers_are_refused_in_strict_mode_before_anything_is_created(
    table_sink: SinkTarget, name: str
) -> None:
    fresh = table_sink.committed()
    p = table_sink.part(table_sink.make())
    with pytest.raises(ConfigError, match=r"identifiers=\"relaxed\"") as refused:
        p.write_batch([orders(0, [0], extra={name: pa.array([1])})])
    assert repr(name) in str(refused.value) or f"`{name}`" in str(refused.value)
    assert table_sink.committed() == fresh
    assert table_sink.columns() == {}


@pytest.mark.capability("identifiers")
def test_hostile_identifiers_are_quoted_in_relaxed_mode(table_sink: SinkTarget) -> None:
    extra = {name: pa.array([i, i + 10], pa.int64()) for i, name in enumerate(HOSTILE)}
    p = table_sink.part(table_sink.make(identifiers="relaxed"))
    p.write_batch([orders(0, [0, 1], extra=extra)])
    p.snapshot()
    assert set(HOSTILE) <= set(table_sink.columns())
    got = table_sink.read().sort_by(C.source_offset)
    for i, name in enumerate(HOSTILE):
        assert got.column(name).to_pylist() == [i, i + 10], name
    assert table_sink.record_ids() == ids_of(orders(0, [0, 1]))


@pytest.mark.capability("identifiers")
@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_names_over_63_bytes_are_refused_in_both_modes(table_sink: SinkTarget, mode: str) -> None:
    p = table_sink.part(table_sink.make(identifiers=mode))
    # PostgreSQL truncates longer names silently, so two of them could collide.
    for name in ("a" * 64, "ü" * 32):  # 64 bytes, in ASCII and in two-byte UTF-8
        q = table_sink.part(table_sink.make(identifiers=mode))
        with pytest.raises(ConfigError, match="63"):
            q.write_batch([orders(0, [0], extra={name: pa.array([1])})])
    p.write_batch([orders(0, [0])])
    p.snapshot()
    assert not any(len(n.encode()) > 63 for n in table_sink.columns())  # noqa: PLR2004


def test_an_empty_batch_writes_nothing_and_commits_nothing(table_sink: SinkTarget) -> None:
    fresh = table_sink.committed()
    p = table_sink.part(table_sink.make())
    p.write_batch([orders(0, [])])
    assert table_sink.offsets(p.snapshot()) == {}
    assert table_sink.committed() == fresh
    assert table_sink.read().num_rows == 0
    p.write_batch([orders(0, [0, 1])])
    p.snapshot()
    held = table_sink.committed()
    p.write_batch([orders(0, []), orders(1, [])])
    assert table_sink.offsets(p.snapshot()) == {"orders:0": 2}
    assert table_sink.committed() == held


def test_a_100k_row_batch_lands_exactly(table_sink: SinkTarget) -> None:
    n = 100_000
    big = orders(0, range(n))
    p = table_sink.part(table_sink.make())
    p.write_batch([big])
    assert table_sink.offsets(p.snapshot()) == {"orders:0": n}
    got = table_sink.read().sort_by(C.source_offset)
    assert got.num_rows == n
    for name in (C.record_id, "order_id", "qty", "customer"):
        assert_same_values(got.column(name), big.column(name), name)
    assert pc.sum(got.column("amount")).as_py() == pc.sum(big.column("amount")).as_py()


def assert_same_values(got: pa.ChunkedArray, want: pa.Array, name: str) -> None:
    """``got`` holds ``want``'s values in order, compared in Arrow (a table's column
    type may differ from the batch's: ``large_string``, ``binary`` for ``binary(16)``)."""
    assert got.null_count == want.null_count == 0, name
    got_flat = got.combine_chunks()
    if got_flat.type != want.type:
        want = want.cast(got_flat.type)  # safe: a value that does not fit raises
    if not got_flat.equals(want):
        diff = pc.indices_nonzero(pc.not_equal(got_flat, want))[0].as_py()
        raise AssertionError(f"{name} at row {diff}: {got_flat[diff]} != {want[diff]}")


def test_rows_refused_on_another_shard_are_written_by_the_rerun(table_sink: SinkTarget) -> None:
    # A stream keyed by another column: 10..19 of `orders:0` reach the shard that does
    # not own it and are refused there, while the owner (another worker) commits
    # 0..9 and 20..29. What the owner commits must not claim 10..19, or the rerun,
    # keyed right, skips them as held.
    from thalweg_bytewax.runtime.parts import route

    owner = route("orders:0", 2)
    sink = table_sink.make(shards=2)
    mine = sink.build_part("flow.sink", f"shard-{owner:03d}", None)
    other = sink.build_part("flow.sink", f"shard-{1 - owner:03d}", None)
    table_sink._open += [mine, other]  # noqa: SLF001 - closed at teardown like part()
    mine.write_batch([orders(0, range(10))])
    with pytest.raises(ConfigError, match=r"routes to shard"):
        other.write_batch([orders(0, range(10, 20))])
    mine.write_batch([orders(0, range(20, 30))])
    mine.snapshot()
    again = table_sink.make(shards=2).build_part("flow.sink", f"shard-{owner:03d}", None)
    table_sink._open.append(again)  # noqa: SLF001
    again.write_batch([orders(0, range(30))])
    again.snapshot()
    assert table_sink.record_ids() == ids_of(orders(0, range(30)))
