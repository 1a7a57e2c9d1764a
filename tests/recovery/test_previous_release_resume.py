"""A store the previous release wrote resumes with this code: nothing lost, nothing twice.

``tests/data/previous_release/store`` is what :mod:`tests.recovery.previous_release_flow`
left after a run over the first part of its inputs, written by the commit
``WRITTEN_BY.txt`` names (regenerate with ``python -m tests.recovery.make_previous_release``
when a release is cut). The resume runs the same flow, built from public names only, on
the second part of the inputs, and every sink must hold every record exactly once, with
the state of the stateful steps carried over.

What the Bytewax recovery store holds (``recovery/part-0.sqlite3``, table ``snaps``,
pickled), by step, and the globals unpickling it resolves — the names a module move
must keep importable:

========================================  ===========================================
step (state key)                          pickled state
========================================  ===========================================
``orders_in`` (FileSource; file key)      ``int``: the next row
``items_in`` (ArrowIPCSource; directory)  ``(str, int)``: file name, next record batch
KafkaSource (topic:partition)             ``dict`` next_offset / leader_epoch / cluster
RawLaneSource, sample source              ``int``: the next offset
every epoch sink (``shard-NNN``):          ``dict[str, int]``: source partition key ->
Parquet lane, Iceberg, PostgreSQL,        the next offset the sink holds
Kafka, Arrow IPC
``dedup.dedup.stateful_batch``            ``(clock, ((bucket, (key, ...)), ...))``
``contract.evaluate.stateful_batch``      ``((rule id, <dedup-shaped window>), ...)``
``revenue.fold.stateful_batch`` (group)   watermark, closed-until, group tuple,
                                          ``pyarrow.Schema``, open panes, sessions,
                                          late numbering
``item_batches.gather`` (bucket)          ``thalweg_bytewax.operators.batching._State``
========================================  ===========================================

Resolved globals: ``thalweg_bytewax.operators.batching._State`` (the one thalweg name)
and pyarrow's ``pyarrow.lib.schema`` / ``field`` / ``type_for_alias`` (the window
state's schema; a decimal column adds ``pyarrow.lib.decimal128``, as in the flagship
flow's revenue windows); the rest is built-in data. The flagship flow on Kafka pickles
no thalweg name at all. Step ids, state keys (file paths, ``topic:
partition``, ``shard-NNN``, group tuples) and contract rule ids (``name@version``, a hash
of the rule's definition) are part of the format too: state under a step id the flow no
longer has is ignored by Bytewax, so a renamed inner step loses its state silently —
:func:`test_the_resumed_run_continues_every_stateful_step_under_its_old_id` catches it.
Outside the recovery store, lanes name the flow and step (``.thalweg-lane``:
``<flow>.<step>``), their directories and ``_twg_source_topic`` the source file path,
their footers carry ``thalweg.rows`` / ``thalweg.first_offset`` / ``thalweg.last_offset``;
the coverage store (``_coverage.sqlite3``) keys rows by ``<flow>.<step>``, topic and
partition; Iceberg snapshot summaries carry ``thalweg.commit`` and
``thalweg.coverage.<flow>.<step>/<topic>:<partition>``. None of them names a module.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pytest

from tests.recovery import previous_release_flow as prf
from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "previous_release"
STORE = FIXTURE / "store"
STORE_DB = STORE / "recovery" / "part-0.sqlite3"
THALWEG_GLOBALS = {("thalweg_bytewax.operators.batching", "_State")}
"""The thalweg names the fixture's recovery store pickles (see the module docstring)."""
FLOW = "previous_release"


class _Recording(pickle.Unpickler):
    """An unpickler that records every global it resolves and names the one it cannot."""

    def __init__(self, data: bytes, where: str, seen: set[tuple[str, str]]) -> None:
        super().__init__(io.BytesIO(data))
        self._where = where
        self._seen = seen

    def find_class(self, module: str, name: str) -> Any:
        self._seen.add((module, name))
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError) as exc:
            msg = (
                f"{self._where}: the previous release pickled `{module}.{name}`, which this "
                f"code cannot import ({type(exc).__name__}: {exc}); keep that name "
                "importable (an alias in its old module) or resumes of existing stores fail"
            )
            raise AssertionError(msg) from None


def _snapshots(db: Path) -> list[tuple[str, str, int, bytes | None]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT step_id, state_key, snap_epoch, ser_change FROM snaps")
        return list(rows)


def test_every_snapshot_of_the_previous_release_unpickles_with_this_code() -> None:
    seen: set[tuple[str, str]] = set()
    snaps = _snapshots(STORE_DB)
    assert snaps, f"{STORE_DB} holds no snapshot"
    for step, key, epoch, blob in snaps:
        if blob is not None:
            _Recording(blob, f"step `{step}`, key `{key}`, epoch {epoch}", seen).load()
    thalweg = {(m, n) for m, n in seen if m.split(".")[0] == "thalweg_bytewax"}
    # A new thalweg name in the store is a new name to keep importable: add it to the
    # inventory above (and to the report of what a module move must keep).
    assert thalweg == THALWEG_GLOBALS


def test_the_store_holds_the_state_of_every_kind_of_step() -> None:
    steps = {step.removeprefix(f"{FLOW}.") for step, *_ in _snapshots(STORE_DB)}
    assert steps >= {
        "orders_in",
        "items_in",
        "raw_lane",
        "dlq",
        "ice_orders",
        "ice_revenue",
        "ipc_orders",
        "ipc_copy",
        "item_lane",
        "dedup.dedup.stateful_batch",
        "contract.evaluate.stateful_batch",
        "revenue.fold.stateful_batch",
        "item_batches.gather",
    }


def test_the_fixture_names_the_commit_that_wrote_it() -> None:
    written = dict(
        line.split(" ", 1) for line in (FIXTURE / "WRITTEN_BY.txt").read_text().splitlines()
    )
    assert len(written["commit"]) == 40
    assert written["root"] == str(prf.ROOT)


@dataclass
class Resumed:
    """What the resumed run left, read back while the root was held."""

    orders: pa.Table
    revenue: pa.Table
    late: pa.Table
    raw: pa.Table
    dlq: pa.Table
    ipc: pa.Table
    ipc_copy: pa.Table
    item_lane: pa.Table
    coverage: dict[tuple[str, str, int], list[list[int]]]
    steps_before: dict[str, int]
    steps_after: dict[str, int]


def _lane(path: Path, fmt: str = "parquet") -> pa.Table:
    # Names starting with "." or "_" (markers, schemas, the coverage store) are skipped.
    return ds.dataset(path, format=fmt).to_table()


def _last_epochs(db: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for step, _, epoch, _ in _snapshots(db):
        out[step] = max(epoch, out.get(step, -1))
    return out


@pytest.fixture(scope="module")
def resumed() -> Iterator[Resumed]:
    """Put the store back at its root, add the second part of the inputs, resume."""
    where = prf.layout()
    with prf.root_lock():
        shutil.rmtree(where.root, ignore_errors=True)
        shutil.copytree(STORE, where.root)
        with where.csv.open("a", encoding="utf-8") as csv:
            csv.write((FIXTURE / "part_two.csv").read_text(encoding="utf-8"))
        shutil.copyfile(FIXTURE / "part_two_items.arrow", prf.ipc_file(where, prf.IPC_ROWS[1]))
        prf.run(where)
        catalog = IcebergCatalogConfig(warehouse=str(where.lake / "warehouse")).load()

        def table(name: str) -> pa.Table:
            from pyiceberg.exceptions import NoSuchTableError  # noqa: PLC0415 - an extra

            try:
                return catalog.load_table(f"{prf.NAMESPACE}.{name}").scan().to_arrow()
            except NoSuchTableError:  # never written to: no rows
                return pa.table({})

        with sqlite3.connect(where.lake / "raw" / "_coverage.sqlite3") as con:
            rows = con.execute("SELECT sink, topic, partition, ranges FROM coverage").fetchall()
        yield Resumed(
            orders=table("orders"),
            revenue=table("revenue"),
            late=table("late"),
            raw=_lane(where.lake / "raw"),
            dlq=_lane(where.lake / "dlq"),
            ipc=_lane(where.lake / "ipc", "ipc"),
            ipc_copy=_lane(where.lake / "ipc_copy"),
            item_lane=_lane(where.lake / "item_lane"),
            coverage={(s, t, p): json.loads(r) for s, t, p, r in rows},
            steps_before=_last_epochs(STORE_DB),
            steps_after=_last_epochs(where.recovery / "part-0.sqlite3"),
        )


def _orders_csv() -> pa.Table:
    text = prf.part_one_csv() + (FIXTURE / "part_two.csv").read_text(encoding="utf-8")
    return pacsv.read_csv(io.BytesIO(text.encode()))


def test_the_raw_lane_holds_every_input_row_once(resumed: Resumed) -> None:
    offsets = resumed.raw.column("_twg_source_offset").to_pylist()
    assert sorted(offsets) == list(range(_orders_csv().num_rows))
    assert len(set(resumed.raw.column("_twg_record_id").to_pylist())) == resumed.raw.num_rows


def test_the_tables_hold_every_clean_order_once_and_dedup_and_the_contract_kept_state(
    resumed: Resumed,
) -> None:
    orders = resumed.orders.column("order_id").to_pylist()
    # The replayed first-part order is dropped by the restored dedup state; the order
    # reusing a first-part payment reference is rejected by the restored `unique` window.
    expected = {f"o{i:04d}" for i in (*prf.PART_ONE, *prf.PART_TWO)} - {f"o{prf.BAD_AMOUNT:04d}"}
    expected.add(prf.LATE_ORDER)
    assert Counter(orders) == Counter(expected)
    ids = resumed.orders.column("_twg_record_id").to_pylist()
    assert len(set(ids)) == len(ids)
    # The Arrow IPC sink holds the same records, each once.
    ipc_ids = resumed.ipc.column("_twg_record_id").to_pylist()
    assert Counter(ipc_ids) == Counter(ids)
    dlq = dict(
        zip(
            resumed.dlq.column("_twg_source_offset").to_pylist(),
            resumed.dlq.column("rules").to_pylist(),
            strict=True,
        )
    )
    raw = resumed.raw.sort_by("_twg_source_offset")
    names = raw["order_id"].to_pylist()
    by_order = dict(zip(names, raw["_twg_source_offset"].to_pylist(), strict=True))
    assert set(dlq) == {by_order[f"o{prf.BAD_AMOUNT:04d}"], by_order[prf.REUSING_ORDER]}
    assert any(r.startswith("payment_ref_unique@") for r in dlq[by_order[prf.REUSING_ORDER]])


def test_windows_are_right_and_a_closed_window_stays_closed(resumed: Resumed) -> None:
    clean = _orders_csv()
    dropped = [f"o{prf.BAD_AMOUNT:04d}", prf.REUSING_ORDER, prf.LATE_ORDER]
    clean = clean.filter(pc.invert(pc.is_in(clean["order_id"], pa.array(dropped))))
    firsts = dict.fromkeys(clean["order_id"].to_pylist())  # the replay is dropped
    keep = [firsts.pop(o, False) is None for o in clean["order_id"].to_pylist()]
    clean = clean.filter(pa.array(keep))
    minute = pc.floor_temporal(clean["created_at"], unit="minute")
    clean = clean.append_column("window_start", minute)
    want = clean.group_by(["status", "window_start"]).aggregate(
        [("amount", "sum"), ("order_id", "count")]
    )
    expected = {
        (s, w.timestamp()): (r, n)
        for s, w, r, n in zip(
            *(want[c].to_pylist() for c in ("status", "window_start", "amount_sum")),
            want["order_id_count"].to_pylist(),
            strict=True,
        )
    }
    got = resumed.revenue
    windows = {
        (s, w.timestamp()): (r, n)
        for s, w, r, n in zip(
            *(got[c].to_pylist() for c in ("status", "window_start", "revenue", "orders")),
            strict=True,
        )
    }
    assert len(windows) == got.num_rows == 36
    assert windows.keys() == expected.keys()
    for key, (revenue, n) in expected.items():
        assert windows[key] == (pytest.approx(revenue), n), key
    # The late order's window closed in the previous run: the restored watermark sends
    # it to the late report instead of re-opening (and overwriting) that window.
    late = resumed.late.to_pylist()
    assert late, "the late order did not reach the late report"
    assert [(r["status"], r["late_records"], r["event_time_min"]) for r in late] == [
        ("new", 1, prf.LATE_AT)
    ]


def test_the_arrow_ipc_source_and_to_batches_resume_where_they_stopped(
    resumed: Resumed,
) -> None:
    items = [f"item-{o}" for r in prf.IPC_ROWS for o in r]
    copied = resumed.ipc_copy.column("_twg_source_offset").to_pylist()
    assert sorted(copied) == [o for r in prf.IPC_ROWS for o in r]
    assert Counter(resumed.ipc_copy.column("item").to_pylist()) == Counter(items)
    lane = resumed.item_lane.sort_by("_twg_source_offset")
    assert lane.column("item").to_pylist() == items
    # The per-bucket counter continued from its restored state: no gap, no reuse.
    offsets = lane.column("_twg_source_offset").to_pylist()
    assert offsets == list(range(offsets[0], offsets[0] + len(items)))


def _offsets(table: pa.Table) -> dict[tuple[str, int], set[int]]:
    out: dict[tuple[str, int], set[int]] = {}
    names = ("_twg_source_topic", "_twg_source_partition", "_twg_source_offset")
    for t, p, o in zip(*(table[c].to_pylist() for c in names), strict=True):
        out.setdefault((t, p), set()).add(o)
    return out


def test_coverage_claims_what_each_sink_holds_and_only_what_was_set_aside(
    resumed: Resumed,
) -> None:
    claimed: dict[str, dict[tuple[str, int], set[int]]] = {}
    for (sink, topic, partition), spans in resumed.coverage.items():
        offsets = {o for lo, hi in spans for o in range(lo, hi + 1)}
        claimed.setdefault(sink.removeprefix(f"{FLOW}."), {})[(topic, partition)] = offsets
    assert claimed["raw_lane"] == _offsets(resumed.raw)
    assert claimed["ipc_copy"] == _offsets(resumed.ipc_copy)
    # The table and the IPC lane may also claim the offsets they will never hold: the
    # rejected records (in the DLQ) and the replay dedup dropped.
    raw = resumed.raw
    replays = raw.filter(pc.equal(raw["order_id"], f"o{prf.REPLAYED:04d}"))
    replay = max(replays["_twg_source_offset"].to_pylist())
    (part,) = _offsets(raw)
    set_aside = _offsets(resumed.dlq)[part] | {replay}
    for step, table in (("ice_orders", resumed.orders), ("ipc_orders", resumed.ipc)):
        held = _offsets(table)
        assert claimed[step].keys() == held.keys() == {part}, step
        assert claimed[step][part] >= held[part], f"{step}: holds rows it does not claim"
        assert claimed[step][part] - held[part] <= set_aside, f"{step}: claims a lost row"


def test_the_resumed_run_continues_every_stateful_step_under_its_old_id(
    resumed: Resumed,
) -> None:
    # A step id the previous release did not have holds state the resume started fresh:
    # the old state, under the old id, was ignored.
    # (`ice_late` got its first item, the late order, in the resumed run.)
    fresh = {f"{FLOW}.ice_late"}
    new = sorted(set(resumed.steps_after) - set(resumed.steps_before) - fresh)
    assert not new, f"state under step ids the previous release did not write: {new}"
    before = resumed.steps_before
    moved_on = {s for s, e in resumed.steps_after.items() if e > before.get(s, e)}
    assert moved_on >= {
        f"{FLOW}.{s}"
        for s in (
            "orders_in",
            "items_in",
            "raw_lane",
            "ice_orders",
            "ipc_orders",
            "dedup.dedup.stateful_batch",
            "contract.evaluate.stateful_batch",
            "revenue.fold.stateful_batch",
            "item_batches.gather",
        )
    }
