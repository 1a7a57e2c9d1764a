"""XML records: repeated elements are lists, nested ones structs, nothing outside is read.

The mapping rule (docs/connectors/files.md, "XML records") under ``schema="infer"`` and
under a given schema, the records before a break in malformed XML, entities and DTDs
never read, and the reader's bounds ending in DLQ rows. The same module runs against the
oldest lxml the ``files`` extra allows (``PYTHONPATH`` pointing at lxml 5.0) and the newest.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from thalweg_bytewax.connectors.files import FileSource, XmlLimits
from thalweg_bytewax.errors import ConfigError

ORDERS = "/orders/order"


def read(
    path: Path, schema: Any = "infer", **kwargs: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every row and DLQ row of one XML file, through the source's partition."""
    kwargs.setdefault("record_path", ORDERS)
    source = FileSource(str(path), schema=schema, metadata="locator", **kwargs)
    [key] = source.list_parts()
    part = source.build_part("xml", key, None)
    ok: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    try:
        while True:
            for _, batch in part.next_batch():
                (bad if "reason" in batch.schema.names else ok).extend(batch.to_pylist())
    except StopIteration:
        pass
    finally:
        part.close()
    return ok, bad


def payload(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("_twg_")} for r in rows]


ISSUE_RECORD = (
    '<orders><order id="1"><tag>a</tag><tag>b</tag><ship><city>P</city></ship></order></orders>'
)


def test_repeated_children_are_a_list_and_nested_ones_a_struct_when_inferred(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.xml"
    path.write_text(ISSUE_RECORD)
    ok, bad = read(path)
    assert bad == []
    assert payload(ok) == [{"@id": "1", "tag": ["a", "b"], "ship": {"city": "P"}}]


def test_repeated_children_are_a_list_and_nested_ones_a_struct_with_a_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.xml"
    path.write_text(ISSUE_RECORD)
    schema = pa.schema(
        [
            pa.field("@id", pa.int64(), nullable=False),
            pa.field("tag", pa.list_(pa.string())),
            pa.field("ship", pa.struct([pa.field("city", pa.string())])),
        ]
    )
    ok, bad = read(path, schema)
    assert bad == []
    assert payload(ok) == [{"@id": 1, "tag": ["a", "b"], "ship": {"city": "P"}}]


def test_inference_widens_over_the_window_and_types_leaves_as_text(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(
        "<orders>"
        "<order><tag>a</tag><ship>unknown</ship><amount>1.5</amount></order>"
        '<order><tag>b</tag><tag>c</tag><ship><city>P</city></ship><amount currency="EUR">2'
        "</amount></order>"
        "<order/>"
        "</orders>"
    )
    ok, bad = read(path)
    assert bad == []
    assert payload(ok) == [
        {
            "tag": ["a"],
            "ship": {"city": None, "#text": "unknown"},
            "amount": {"@currency": None, "#text": "1.5"},
        },
        {
            "tag": ["b", "c"],
            "ship": {"city": "P", "#text": None},
            "amount": {"@currency": "EUR", "#text": "2"},
        },
        {"tag": None, "ship": None, "amount": None},
    ]


def test_mixed_content_keeps_the_text_around_the_children(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(
        "<orders><order><note>Deliver <b>before</b> noon</note>\n  <id>1</id>\n</order></orders>"
    )
    ok, bad = read(path)
    assert bad == []
    # Whitespace between the record's children is layout, not text: no `#text` column.
    assert payload(ok) == [{"note": {"b": "before", "#text": "Deliver  noon"}, "id": "1"}]


def test_namespaces_are_dropped_and_records_matched_by_local_name(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(
        '<o:orders xmlns:o="urn:o" xmlns:x="urn:x"><o:order x:id="7"><o:id>1</o:id>'
        "</o:order></o:orders>"
    )
    ok, bad = read(path)
    assert bad == []
    assert payload(ok) == [{"@id": "7", "id": "1"}]


def test_a_repeated_child_where_the_schema_has_a_scalar_is_a_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(
        "<orders><order><tag>a</tag></order><order><tag>a</tag><tag>b</tag></order>"
        "<order><tag><x>1</x></tag></order></orders>"
    )
    ok, bad = read(path, pa.schema([pa.field("tag", pa.string())]))
    assert [r["tag"] for r in ok] == ["a"]
    assert [r["_twg_source_offset"] for r in bad] == [1, 2]
    assert "`/orders/order/tag` occurs 2 times" in bad[0]["message"]
    assert "not a list" in bad[0]["message"]
    assert "child element(s) x" in bad[1]["message"]
    assert bad[1]["_twg_source_value"] is not None


def test_a_name_new_after_the_inferred_window_is_a_dlq_row_not_a_drop(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(
        "<orders><order><id>1</id></order><order><id>2</id></order>"
        "<order><id>3</id><late>x</late></order></orders>"
    )
    ok, bad = read(path, batch_rows=2)
    assert [r["id"] for r in ok] == ["1", "2"]
    [row] = bad
    assert row["_twg_source_offset"] == 2
    assert "`late`" in row["message"]
    assert "pass a schema" in row["message"]


def test_the_inferred_schema_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "o.xml"
    path.write_text(ISSUE_RECORD)
    with caplog.at_level(logging.WARNING):
        read(path)
    assert any(
        "XML schema inferred" in r.getMessage() and "tag: list" in r.getMessage()
        for r in caplog.records
    )


def test_a_schema_type_records_cannot_map_to_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text(ISSUE_RECORD)
    with pytest.raises(ConfigError, match="map<string, string>"):
        read(path, pa.schema([pa.field("tag", pa.map_(pa.string(), pa.string()))]))


# ---------------------------------------------------------------------- malformed


def test_every_record_before_a_break_lands_and_the_dlq_row_names_the_next(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.xml"
    recs = [
        f"<order><id>{i}</id><customer>c</customer><amount>1.5</amount><paid>true</paid></order>"
        for i in range(5000)
    ]
    recs[2500] = "<order><id>2500</id><customer>oops</order>"
    path.write_text("<orders>" + "".join(recs) + "</orders>")
    ok, bad = read(path, pa.schema([pa.field("id", pa.int64())]), batch_rows=1000)
    assert [r["id"] for r in ok] == list(range(2500))
    [row] = bad
    assert row["_twg_source_offset"] == 2500
    assert "malformed XML in record 2500" in row["message"]


def test_malformed_xml_before_the_first_record_says_so(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text("<orders><header></head><order><id>1</id></order></orders>")
    ok, bad = read(path)
    assert ok == []
    [row] = bad
    assert row["_twg_source_offset"] == 0
    assert "malformed XML before the first record" in row["message"]
    assert "record -1" not in row["message"]


def test_a_truncated_file_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text("<orders><order><id>1</id></order><order><id>2</id></order><order><id>")
    ok, bad = read(path)
    assert [r["id"] for r in ok] == ["1", "2"]
    [row] = bad
    assert row["_twg_source_offset"] == 2
    assert "malformed XML in record 2" in row["message"]


# ---------------------------------------------------------------------- nothing outside


def _everything(ok: list[dict[str, Any]], bad: list[dict[str, Any]]) -> str:
    return repr(ok) + repr(bad)


def test_an_external_entity_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    path = tmp_path / "o.xml"
    path.write_text(
        f'<?xml version="1.0"?><!DOCTYPE orders [<!ENTITY xxe SYSTEM "file://{secret}">]>'
        "<orders><order><id>&xxe;</id></order></orders>"
    )
    ok, bad = read(path)
    assert "TOPSECRET" not in _everything(ok, bad)
    assert ok == []
    [row] = bad
    assert "declares an entity" in row["message"]


def test_a_parameter_entity_and_an_external_dtd_are_never_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    dtd = tmp_path / "evil.dtd"
    dtd.write_text(f'<!ENTITY xxe SYSTEM "file://{secret}">')
    declared = tmp_path / "p.xml"
    declared.write_text(
        f'<!DOCTYPE orders [<!ENTITY % ext SYSTEM "file://{dtd}"> %ext;]>'
        "<orders><order><id>&xxe;</id></order></orders>"
    )
    ok, bad = read(declared)
    assert "TOPSECRET" not in _everything(ok, bad)
    assert ok == []
    # An external DTD is not loaded: its entity stays a reference, and the record that
    # holds one is refused rather than read with the reference silently left out.
    external = tmp_path / "e.xml"
    external.write_text(
        f'<!DOCTYPE orders SYSTEM "file://{dtd}">'
        "<orders><order><id>&xxe;</id></order><order><id>2</id></order></orders>"
    )
    ok, bad = read(external)
    assert "TOPSECRET" not in _everything(ok, bad)
    assert [r["id"] for r in ok] == ["2"]
    assert [r["_twg_source_offset"] for r in bad] == [0]
    assert "entity reference `&xxe;`" in bad[0]["message"]


def test_xinclude_is_not_processed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    path = tmp_path / "o.xml"
    path.write_text(
        '<orders xmlns:xi="http://www.w3.org/2001/XInclude"><order><id>1</id>'
        f'<xi:include href="file://{secret}" parse="text"/></order></orders>'
    )
    ok, bad = read(path)
    assert "TOPSECRET" not in _everything(ok, bad)
    assert payload(ok) == [{"id": "1", "include": {"@href": f"file://{secret}", "@parse": "text"}}]


def test_entity_expansion_is_refused_before_any_expansion(tmp_path: Path) -> None:
    lol = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    path = tmp_path / "o.xml"
    path.write_text(
        f'<!DOCTYPE orders [<!ENTITY l0 "lol">{lol}]>'
        '<orders><order a="&l9;"><id>&l9;</id></order></orders>'
    )
    ok, bad = read(path)
    assert ok == []
    [row] = bad
    assert "declares an entity" in row["message"]


# ---------------------------------------------------------------------- bounds


def test_a_record_nesting_too_deep_is_a_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    deep = "<a>" * 40 + "x" + "</a>" * 40
    path.write_text(
        f"<orders><order><id>1</id></order><order>{deep}</order><order><id>3</id></order></orders>"
    )
    ok, bad = read(path, pa.schema([pa.field("id", pa.string())]))
    assert [r["id"] for r in ok] == ["1", "3"]
    [row] = bad
    assert row["_twg_source_offset"] == 1
    assert "max_depth=32" in row["message"]


def test_a_record_with_too_many_elements_is_a_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    wide = "<t>x</t>" * 2000
    path.write_text(f"<orders><order>{wide}</order><order><t>y</t></order></orders>")
    ok, bad = read(path, xml_limits=XmlLimits(max_record_nodes=1000))
    assert payload(ok) == [{"t": "y"}]
    [row] = bad
    assert row["_twg_source_offset"] == 0
    assert "max_record_nodes=1000" in row["message"]


def test_a_record_larger_than_the_bound_is_a_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    big = "<t>" + "x" * 300_000 + "</t>"
    path.write_text(
        f"<orders><order><t>a</t></order><order>{big}{big}</order><order><t>b</t></order>"
        f"<order>{big}</order></orders>"
    )
    ok, bad = read(path, xml_limits=XmlLimits(max_record_bytes=400_000))
    assert [r["_twg_source_offset"] for r in ok] == [0, 2, 3]
    [row] = bad
    assert row["_twg_source_offset"] == 1
    assert "max_record_bytes=400000" in row["message"]


def test_too_many_inferred_fields_stop_the_file_with_a_dlq_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    fields = "".join(f"<f{i}>1</f{i}>" for i in range(50))
    path.write_text(f"<orders><order>{fields}</order></orders>")
    ok, bad = read(path, xml_limits=XmlLimits(max_fields=20))
    assert ok == []
    [row] = bad
    assert "50 distinct fields, more than max_fields=20" in row["message"]
    ok, bad = read(
        path, pa.schema([pa.field("f3", pa.int64())]), xml_limits=XmlLimits(max_fields=20)
    )
    assert payload(ok) == [{"f3": 1}]


def test_a_window_is_cut_at_its_byte_bound(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    recs = "".join(f"<order><id>{i}</id><pad>{'p' * 1000}</pad></order>" for i in range(300))
    path.write_text(f"<orders>{recs}</orders>")
    source = FileSource(
        str(path),
        schema="infer",
        record_path=ORDERS,
        xml_limits=XmlLimits(max_window_bytes=100_000),
    )
    [key] = source.list_parts()
    part = source.build_part("xml", key, None)
    sizes = []
    try:
        while True:
            sizes += [b.num_rows for _, b in part.next_batch()]
    except StopIteration:
        pass
    finally:
        part.close()
    assert sum(sizes) == 300
    assert max(sizes) < 300 and len(sizes) > 2


def test_a_prolog_without_a_root_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    path.write_text("<!-- " + "c" * 200_000 + " --><orders><order><id>1</id></order></orders>")
    ok, bad = read(path, xml_limits=XmlLimits(max_prolog_bytes=100_000))
    assert ok == []
    [row] = bad
    assert "max_prolog_bytes=100000" in row["message"]


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigError, match="max_depth"):
        XmlLimits(max_depth=0)
    with pytest.raises(ConfigError, match="xml_limits"):
        FileSource(
            "x.xml",
            schema="infer",
            record_path=ORDERS,
            xml_limits={"max_depth": 3},  # type: ignore[arg-type]
        )


# ---------------------------------------------------------------------- resume


def test_a_resume_skips_the_records_before_its_row(tmp_path: Path) -> None:
    path = tmp_path / "o.xml"
    recs = "".join(f"<order><id>{i}</id><tag>a</tag><tag>b</tag></order>" for i in range(50))
    path.write_text(f"<orders>{recs}</orders>")
    source = FileSource(str(path), schema="infer", record_path=ORDERS, batch_rows=7)
    [key] = source.list_parts()
    part = source.build_part("xml", key, 20)
    rows: list[dict[str, Any]] = []
    try:
        while True:
            for _, b in part.next_batch():
                rows += b.to_pylist()
    except StopIteration:
        pass
    finally:
        part.close()
    assert [r["_twg_source_offset"] for r in rows] == list(range(20, 50))
    assert [r["id"] for r in rows] == [str(i) for i in range(20, 50)]
    assert all(r["tag"] == ["a", "b"] for r in rows)


# ---------------------------------------------------------------------- the docs


@pytest.mark.slow
def test_the_docs_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, str(root / "docs/examples/files_xml.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 5
    page = (root / "docs/connectors/files.md").read_text()
    for line in lines:
        assert f"\n{line}\n" in page, line


@pytest.mark.parametrize("schema", ["infer", pa.schema([pa.field("id", pa.int64())])])
def test_the_root_element_can_be_the_record(tmp_path: Path, schema: Any) -> None:
    path = tmp_path / "o.xml"
    path.write_text("<order><id>1</id></order>")
    ok, bad = read(path, schema, record_path="/order")
    assert bad == []
    assert [str(r["id"]) for r in ok] == ["1"]
