"""State pickled by the release before the move unpickles to the classes at their new homes.

Bytewax pickles source, sink and operator state into its recovery store by module and
class name, and a stateful step may hold records, locators, rejections or coverage. Each
pickle below was written by the release before the record model, the DLQ format and
coverage moved into their folders (``pickle.dumps`` of the object beside it, base64), so
a recovery store written then resumes now.
"""

from __future__ import annotations

import base64
import pickle
import warnings
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from thalweg_bytewax import Locator, MetadataColumns, MetadataPolicy, RawRecord
from thalweg_bytewax.coverage import OffsetCoverage
from thalweg_bytewax.coverage.store import CoverageEntry
from thalweg_bytewax.lanes.dlq import Rejected, RejectReason
from thalweg_bytewax.records.model import OffsetSpan, TimestampType

LOCATOR = Locator("orders", 3, 42, "c1", 7)

WRITTEN_BEFORE_THE_MOVE: list[tuple[str, str, Callable[[], object]]] = [
    (
        "locator",
        (
            "gASVQgAAAAAAAACMFnRoYWx3ZWdfYnl0ZXdheC5yZWNvcmSUjAdMb2NhdG9ylJOUKYGUXZQojAZv"
            "cmRlcnOUSwNLKowCYzGUSwdlYi4="
        ),
        lambda: LOCATOR,
    ),
    (
        "raw_record",
        (
            "gASVCAEAAAAAAACMFnRoYWx3ZWdfYnl0ZXdheC5yZWNvcmSUjAlSYXdSZWNvcmSUk5QpgZRdlCho"
            "AIwHTG9jYXRvcpSTlCmBlF2UKIwGb3JkZXJzlEsDSyqMAmMxlEsHZWJDAWuUQwF2lIwBaJRDAXiU"
            "hpSMAW6UToaUhpRLAWgAjA1UaW1lc3RhbXBUeXBllJOUjApDcmVhdGVUaW1llIWUUpROTk6MCGRh"
            "dGV0aW1llIwIZGF0ZXRpbWWUk5RDCgfqAQEAAAAAAACUaBiMCHRpbWV6b25llJOUaBiMCXRpbWVk"
            "ZWx0YZSTlEsASwBLAIeUUpSFlFKUhpRSlEMQAQEBAQEBAQEBAQEBAQEBAZRlYi4="
        ),
        lambda: RawRecord(
            LOCATOR,
            b"k",
            b"v",
            (("h", b"x"), ("n", None)),
            1,
            TimestampType.CREATE_TIME,
            ingest_ts=datetime(2026, 1, 1, tzinfo=UTC),
            record_id=b"\x01" * 16,
        ),
    ),
    (
        "offset_span",
        (
            "gASVQAAAAAAAAACMFnRoYWx3ZWdfYnl0ZXdheC5yZWNvcmSUjApPZmZzZXRTcGFulJOUKYGUXZQo"
            "jAZvcmRlcnOUSwNLAUsFZWIu"
        ),
        lambda: OffsetSpan("orders", 3, 1, 5),
    ),
    (
        "metadata_columns",
        (
            "gASVRgAAAAAAAACMGHRoYWx3ZWdfYnl0ZXdheC5tZXRhZGF0YZSMD01ldGFkYXRhQ29sdW1uc5ST"
            "lCmBlH2UjAZwcmVmaXiUjANfeF+Uc2Iu"
        ),
        lambda: MetadataColumns("_x_"),
    ),
    (
        "metadata_policy",
        (
            "gASVPQAAAAAAAACMGHRoYWx3ZWdfYnl0ZXdheC5tZXRhZGF0YZSMDk1ldGFkYXRhUG9saWN5lJOU"
            "jAdsb2NhdG9ylIWUUpQu"
        ),
        lambda: MetadataPolicy.LOCATOR,
    ),
    (
        "rejected",
        (
            "gASVpwAAAAAAAACME3RoYWx3ZWdfYnl0ZXdheC5kbHGUjAhSZWplY3RlZJSTlCmBlF2UKGgAjAxS"
            "ZWplY3RSZWFzb26Uk5SMAmRxlIWUUpSMCHZhbGlkYXRllIwDYmFklIwWdGhhbHdlZ19ieXRld2F4"
            "LnJlY29yZJSMB0xvY2F0b3KUk5QpgZRdlCiMBm9yZGVyc5RLA0sqjAJjMZRLB2VijANyQDGUhZRO"
            "Tk5OTmViLg=="
        ),
        lambda: Rejected(RejectReason.DQ, "validate", "bad", LOCATOR, rules=("r@1",)),
    ),
    (
        "coverage",
        (
            "gASVZQAAAAAAAACMGHRoYWx3ZWdfYnl0ZXdheC5jb3ZlcmFnZZSMDk9mZnNldENvdmVyYWdllJOU"
            "KYGUTn2UKIwFX2VuZHOUTowGX3NwYW5zlEsASwmGlEsUSx2GlIaUjAdfc3RhcnRzlE51hpRiLg=="
        ),
        lambda: OffsetCoverage([(0, 9), (20, 29)]),
    ),
    (
        "coverage_entry",
        (
            "gASVDQEAAAAAAACMHnRoYWx3ZWdfYnl0ZXdheC5jb3ZlcmFnZV9zdG9yZZSMDUNvdmVyYWdlRW50"
            "cnmUk5QpgZRdlCiMD29yZGVycy5yYXdfbGFuZZSMBm9yZGVyc5RLA4wYdGhhbHdlZ19ieXRld2F4"
            "LmNvdmVyYWdllIwOT2Zmc2V0Q292ZXJhZ2WUk5QpgZROfZQojAVfZW5kc5ROjAZfc3BhbnOUSwBL"
            "CYaUhZSMB19zdGFydHOUTnWGlGKMCGRhdGV0aW1llIwIZGF0ZXRpbWWUk5RDCgfqAQEAAAAAAACU"
            "aBKMCHRpbWV6b25llJOUaBKMCXRpbWVkZWx0YZSTlEsASwBLAIeUUpSFlFKUhpRSlGViLg=="
        ),
        lambda: CoverageEntry(
            "orders.raw_lane",
            "orders",
            3,
            OffsetCoverage([(0, 9)]),
            datetime(2026, 1, 1, tzinfo=UTC),
        ),
    ),
]


@pytest.mark.parametrize(
    ("written", "expected"),
    [(written, expected) for _, written, expected in WRITTEN_BEFORE_THE_MOVE],
    ids=[name for name, _, _ in WRITTEN_BEFORE_THE_MOVE],
)
def test_state_written_before_the_move_unpickles(
    written: str, expected: Callable[[], object]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the old module names
        restored = pickle.loads(base64.b64decode(written))
    want = expected()
    assert type(restored) is type(want)
    assert restored == want
    # and what is pickled now names the class where it lives, and round-trips
    assert pickle.loads(pickle.dumps(restored)) == want
