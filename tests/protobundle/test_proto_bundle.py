"""`thalweg proto bundle`: a real multi-root proto tree bundled, verified and decoded.

The trees are written by the tests: a Maven-style repository with three
`src/main/proto` roots importing across roots, an identical duplicate, Google's
Timestamp, maps, oneofs, optional, nested types, enums and reserved ranges. Broken
trees carry missing imports, an import cycle and a conflicting duplicate, and every
problem must be named in one error.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import message_factory

from tests.fixtures.odcs_schema import odcs_schema_errors
from thalweg_bytewax._deps import require
from thalweg_bytewax.codecs import ProtobufCodec
from thalweg_bytewax.codecs._proto_pool import pool_from_files
from thalweg_bytewax.protobundle import BundleError, build_bundle, bundle
from thalweg_bytewax.protobundle._compile import imports_of
from thalweg_bytewax.schemamodel import LOSS_PROPERTY

ID = """syntax = "proto3";
package example.common;
// An identifier; "// not a comment" inside a string stays a string.
message Id { string value = 1; }
"""
MONEY = """syntax = "proto3";
package example.common;
message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }
"""
ORDER = """syntax = "proto3";
package com.example.orders;
import "example/common/id.proto";
import "example/common/money.proto";
import "google/protobuf/timestamp.proto";
/* import "example/commented/out.proto"; */
// import "example/commented/out2.proto";
message Order {
  .example.common.Id id = 1;
  google.protobuf.Timestamp created_at = 2;
  repeated Line lines = 3;
  map<string, string> attributes = 4;
  oneof payment { string card = 5; string iban = 6; }
  optional string note = 7;
  Status status = 8;
  reserved 9, 12 to 14;
  reserved "legacy";
  enum Status { STATUS_UNSPECIFIED = 0; PLACED = 1; SHIPPED = 2; }
  message Line { string sku = 1; int64 quantity = 2; .example.common.Money price = 3; }
}
"""
PAYMENT = """syntax = "proto3";
package com.example.payments;
import "example/common/id.proto";
message Payment { .example.common.Id order_id = 1; uint64 amount_cents = 2; bytes token = 3; }
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write(
        tmp_path / "repo",
        {
            "common/src/main/proto/example/common/id.proto": ID,
            "common/src/main/proto/example/common/money.proto": MONEY,
            "orders/src/main/proto/com/example/orders/order.proto": ORDER,
            "payments/src/main/proto/com/example/payments/payment.proto": PAYMENT,
            # The same import path under a second root, byte-identical (with a BOM).
            "payments/src/main/proto/example/common/id.proto": "\ufeff" + ID,
            # A vendored build mirror that differs: never walked.
            "orders/build/src/main/proto/example/common/id.proto": ID + "// drifted\n",
        },
    )


@pytest.mark.slow
def test_a_multi_root_repository_bundles_verified_and_decodes(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    b = bundle(repo, out, name="contracts")
    assert [r.parents[2].name for r in b.roots] == ["common", "orders", "payments"]
    assert b.duplicates == 1
    assert b.verified and not b.package_cycles and not b.single_compiles
    names = {f.name for f in b.descriptor_set.file}
    assert "google/protobuf/timestamp.proto" in names  # --include_imports
    assert sorted(p.name for p in (out / "contracts").iterdir()) == [
        "com.example.orders.proto",
        "com.example.payments.proto",
        "example.common.proto",
    ]
    manifest = json.loads((out / "contracts.messages.json").read_text())
    by_name = {m["name"]: m for m in manifest["messages"]}
    assert manifest["entry_points"] == ["com.example.orders.Order", "com.example.payments.Payment"]
    assert by_name["example.common.Id"]["include_root"].endswith("common/src/main/proto")
    assert by_name["com.example.orders.Order.Line"]["entry"] is False
    assert "NOT a compilable file" in (out / "contracts.proto").read_text()

    # The .pb feeds the codec: a message built from it decodes to the expected row.
    pool = pool_from_files(b.descriptor_set.file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("com.example.orders.Order"))
    msg: Any = cls()
    msg.id.value = "o-1"
    msg.created_at.seconds = 1_700_000_000
    line = msg.lines.add()
    line.sku, line.quantity = "sku-9", 3
    line.price.currency, line.price.units = "EUR", 12
    msg.attributes["channel"] = "web"
    msg.iban = "DE00"
    msg.status = 2
    codec = ProtobufCodec(
        descriptor_set=str(out / "contracts.pb"),
        message_type="com.example.orders.Order",
        framing="none",
    )
    row = codec.decode_value(msg.SerializeToString())
    assert row["id"] == {"value": "o-1"}
    assert row["lines"][0]["price"]["units"] == 12
    assert row["iban"] == "DE00" and row["card"] is None and row["note"] is None
    assert row["status"] == "SHIPPED"
    assert codec.arrow_schema.field("created_at").type == pa.timestamp("us", tz="UTC")


@pytest.mark.slow
def test_the_per_package_files_compile_on_their_own(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    bundle(repo, out, name="c")
    files = sorted(p.name for p in (out / "c").iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out / 'c'}", "-o/dev/null", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_single_package_source_gives_a_compilable_single_file(tmp_path: Path) -> None:
    src = write(tmp_path / "flat", {"example/common/id.proto": ID, "example/common/m.proto": MONEY})
    b = bundle(src, tmp_path / "out")
    assert b.single_compiles and b.verified
    assert not b.single.startswith("//")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", "-o/dev/null", "flat.proto"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_file_source_bundles_only_what_it_imports(repo: Path) -> None:
    b = build_bundle(repo / "payments/src/main/proto/com/example/payments/payment.proto")
    names = {f.name for f in b.descriptor_set.file}
    assert names == {"com/example/payments/payment.proto", "example/common/id.proto"}


def test_missing_imports_and_cycles_are_all_listed_at_once(repo: Path) -> None:
    write(
        repo / "orders/src/main/proto",
        {
            "com/example/orders/refund.proto": 'syntax = "proto3";\npackage com.example.orders;\n'
            'import "example/tax/vat.proto";\nimport "com/example/orders/a.proto";\n'
            "message Refund { string id = 1; }\n",
            "com/example/orders/a.proto": 'syntax = "proto3";\npackage com.example.orders;\n'
            'import "com/example/orders/b.proto";\nimport "example/fx/rate.proto";\n'
            "message A { string id = 1; }\n",
            "com/example/orders/b.proto": 'syntax = "proto3";\npackage com.example.orders;\n'
            'import "com/example/orders/a.proto";\nimport "example/tax/vat.proto";\n'
            "message B { string id = 1; }\n",
        },
    )
    with pytest.raises(BundleError) as info:
        build_bundle(repo)
    problems = info.value.problems
    assert len(problems) == 3, problems
    vat = next(p for p in problems if "example/tax/vat.proto" in p)
    assert "refund.proto" in vat and "b.proto" in vat  # every file that needs it
    assert any("example/fx/rate.proto" in p and "a.proto" in p for p in problems)
    cycle = next(p for p in problems if p.startswith("import cycle"))
    assert "`com/example/orders/a.proto` -> `com/example/orders/b.proto` -> " in cycle
    assert "commented" not in str(info.value)  # commented-out imports are not imports
    assert str(info.value).startswith(f"proto bundle `{repo}`: 3 problem(s)")
    again = pickle.loads(pickle.dumps(info.value))
    assert again.problems == problems and str(again) == str(info.value)


@pytest.mark.slow
def test_differing_duplicates_are_refused_naming_both_origins(repo: Path) -> None:
    copy = repo / "payments/src/main/proto/example/common/id.proto"
    copy.write_text(ID.replace("string value", "int64 value"))
    with pytest.raises(BundleError, match="conflicting copies of `example/common/id.proto`") as info:
        build_bundle(repo)
    text = str(info.value)
    assert str(copy) in text and str(repo / "common/src/main/proto/example/common/id.proto") in text
    kept = build_bundle(repo, on_conflict="first-wins")
    ids = next(f for f in kept.descriptor_set.file if f.name == "example/common/id.proto")
    assert ids.message_type[0].field[0].type == 9  # TYPE_STRING: the first root's copy


@pytest.mark.slow
def test_an_excluded_subtree_and_extra_roots(repo: Path, tmp_path: Path) -> None:
    write(repo / "orders/vendored/src/main/proto", {"example/common/id.proto": "drifted"})
    with pytest.raises(BundleError, match="conflicting"):
        build_bundle(repo)
    assert build_bundle(repo, exclude=["vendored"]).verified
    # The orders root alone lacks its common imports; an extra root supplies them.
    orders = repo / "orders/src/main/proto"
    with pytest.raises(BundleError, match="missing import `example/common/id.proto`"):
        build_bundle(orders)
    assert build_bundle(orders, include_roots=[repo / "common"]).verified


@pytest.mark.slow
def test_a_package_cycle_is_reported_and_the_pb_still_built(tmp_path: Path) -> None:
    src = write(
        tmp_path / "cyc",
        {
            "x/a.proto": 'syntax = "proto3";\npackage x;\nimport "y/b.proto";\n'
            "message A { .y.B b = 1; }\n",
            "y/b.proto": 'syntax = "proto3";\npackage y;\nmessage B { string v = 1; }\n',
            "y/c.proto": 'syntax = "proto3";\npackage y;\nimport "x/d.proto";\n'
            "message C { .x.D d = 1; }\n",
            "x/d.proto": 'syntax = "proto3";\npackage x;\nmessage D { string v = 1; }\n',
        },
    )
    b = build_bundle(src)
    assert b.package_cycles == (("x", "y"),)
    assert not b.verified
    assert len([f for f in b.descriptor_set.file if not f.name.startswith("google/")]) == 4


@pytest.mark.slow
def test_protoc_errors_name_the_original_files(tmp_path: Path) -> None:
    src = write(tmp_path / "bad", {"p/q.proto": 'syntax = "proto3";\nmessage Q { Nope n = 1; }\n'})
    with pytest.raises(BundleError, match="protoc failed") as info:
        build_bundle(src)
    assert str(tmp_path / "bad/p/q.proto") in str(info.value)
    assert "twg-proto-" not in str(info.value)


def test_imports_of_ignores_comments_and_keeps_strings() -> None:
    text = b'// import "a.proto";\n/* import "b.proto"; */\nimport public "c.proto";\n'
    assert imports_of(text) == ["c.proto"]


@pytest.mark.slow
def test_the_cli_bundles_and_reports(repo: Path, tmp_path: Path, capsys) -> None:
    from thalweg_bytewax.cli import main

    assert main(["proto", "bundle", str(repo), "--out-dir", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "3 packages" in out and "com.example.orders.Order" in out
    assert (tmp_path / "o" / "repo.pb").is_file()
    assert main(["proto", "bundle", str(tmp_path / "nope"), "--out-dir", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_emit_odcs_loads_back_to_the_codec_schema(repo: Path, tmp_path: Path) -> None:
    from thalweg_bytewax.cli import main
    from thalweg_bytewax.contracts import load_contract

    out = tmp_path / "o"
    assert main(["proto", "bundle", str(repo), "--out-dir", str(out), "--emit", "odcs"]) == 0
    spec = load_contract(out / "repo.odcs.yaml")
    for message, obj in (("com.example.orders.Order", "Order"), ("com.example.payments.Payment", "Payment")):
        codec = ProtobufCodec(descriptor_set=str(out / "repo.pb"), message_type=message, framing="none")
        got, want = spec.arrow_schema(obj), codec.arrow_schema
        lossy = {"amount_cents"}  # uint64: int64 with minimum 0, stated
        assert got.names == want.names
        for name in want.names:
            if name not in lossy:
                assert got.field(name).type == want.field(name).type, name
                assert got.field(name).nullable == want.field(name).nullable, name
    text = (out / "repo.odcs.yaml").read_text()
    assert "Payment: amount_cents: uint64" in text
    assert "Order: card: member of oneof `payment`" in text
    doc = require("yaml", extra="contracts").safe_load(text)
    assert odcs_schema_errors(doc) == []
    order = next(o for o in doc["schema"] if o["name"] == "Order")
    card = next(p for p in order["properties"] if p["name"] == "card")
    assert card["customProperties"] == [
        {"property": LOSS_PROPERTY, "value": "member of oneof `payment` (exclusivity lost)"}
    ]
    assert order["customProperties"] == [
        {"property": LOSS_PROPERTY, "value": "field numbers are not kept"}
    ]
    assert any(r.kind == "allowed_values" for r in spec.rules("Order"))
