"""XML records in: repeated elements as lists, nested ones as structs.

Run it: ``python docs/examples/files_xml.py [WORKDIR]``. It writes ``orders.xml``, reads
its ``/orders/order`` records twice — with ``schema="infer"`` (every leaf a string) and
with an Arrow schema (leaves cast to its types) — and prints each row as JSON, then the
DLQ row of the record the schema cannot hold.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from thalweg_bytewax.connectors.files import FileSource

ORDERS = """<orders>
  <order id="1">
    <tag>gift</tag>
    <tag>express</tag>
    <ship country="FR"><city>Paris</city></ship>
    <amount currency="EUR">10.5</amount>
    <note>Leave at <b>door</b> please</note>
  </order>
  <order id="2">
    <tag>bulk</tag>
    <amount currency="USD">3</amount>
  </order>
  <order id="3">
    <amount>7</amount>
    <amount>8</amount>
  </order>
</orders>
"""

SCHEMA = pa.schema(
    [
        pa.field("@id", pa.int64(), nullable=False),
        pa.field("tag", pa.list_(pa.string())),
        pa.field(
            "ship", pa.struct([pa.field("@country", pa.string()), pa.field("city", pa.string())])
        ),
        pa.field(
            "amount",
            pa.struct([pa.field("@currency", pa.string()), pa.field("#text", pa.decimal128(9, 2))]),
        ),
    ]
)


def read(path: Path, schema: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The payload of every row and the DLQ rows, through the source's partition."""
    source = FileSource(str(path), schema=schema, record_path="/orders/order", metadata="none")
    [key] = source.list_parts()
    part = source.build_part("xml", key, None)
    rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    try:
        while True:
            for _, batch in part.next_batch():
                (rejected if "reason" in batch.schema.names else rows).extend(batch.to_pylist())
    except StopIteration:
        pass
    finally:
        part.close()
    return rows, rejected


def main(work: Path) -> None:
    """Write the file, read it both ways, print the rows and the DLQ row."""
    path = work / "orders.xml"
    path.write_text(ORDERS)
    inferred, _ = read(path, "infer")
    for row in inferred[:2]:
        print(json.dumps(row))
    typed, rejected = read(path, SCHEMA)
    for row in typed:
        print(json.dumps(row, default=str))
    for row in rejected:
        print(row["_twg_source_offset"], row["message"].split(": ", 1)[1])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
