"""Fuzzing the XML reader under a memory cap: a committed corpus and generated attacks.

``python -m tests.connectors.files.xml_fuzz CAP_MIB FILE...`` caps its own address space at
its size after start-up plus ``CAP_MIB`` (``RLIMIT_AS``), reads each file with the XML
reader (default bounds, ``schema="infer"`` and a given schema) and prints one JSON line
per file: rows read, DLQ rows, the error that escaped (``null`` when none) and the peak
resident memory so far. A memory error under the cap, any escaped exception or a
crash of the process is a failure of the reader.

``python -m tests.connectors.files.xml_fuzz --regenerate`` rewrites the committed corpus
(tests/fixtures/xml_corpus): seed files, and deterministic mutations of each
(truncations, flipped bytes, cut and repeated spans, inserted markup). ``attacks()``
writes the large inputs that are not worth committing (deep, wide, long, many).
"""

from __future__ import annotations

import importlib
import json
import random
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "xml_corpus"
RECORD_PATH = "/orders/order"
_MIB = 1024 * 1024


def _orders(n: int) -> str:
    return "".join(
        f'<order id="{i}"><customer>c-{i % 7}</customer><tag>a</tag><tag>b</tag>'
        f'<ship country="FR"><city>P{i}</city><line>1</line><line>2</line></ship>'
        f'<amount currency="EUR">{i}.5</amount><note>x <b>y</b> z</note></order>'
        for i in range(n)
    )


SEEDS: dict[str, bytes] = {
    "plain": f"<orders>{_orders(20)}</orders>".encode(),
    "declared": f'<?xml version="1.0" encoding="UTF-8"?>\n<orders>{_orders(5)}</orders>'.encode(),
    "pretty": ("<orders>\n" + _orders(5).replace("><", ">\n  <") + "\n</orders>\n").encode(),
    "namespaces": (
        b'<o:orders xmlns:o="urn:o" xmlns:x="urn:x"><o:order x:id="1" id="2"><o:id>1</o:id>'
        b"<x:id>2</x:id></o:order></o:orders>"
    ),
    "cdata_comments_pis": (
        b"<?xml version='1.0'?><!-- c --><orders><?pi x?><order><id><![CDATA[<1>]]></id>"
        b"<!-- in --><note>a<!-- c -->b</note></order></orders>"
    ),
    "utf16": f"<?xml version='1.0' encoding='UTF-16'?><orders>{_orders(3)}</orders>".encode(
        "utf-16"
    ),
    "latin1": "<?xml version='1.0' encoding='ISO-8859-1'?><orders><order><c>é</c></order></orders>".encode(
        "latin-1"
    ),
    "xxe": (
        b'<?xml version="1.0"?><!DOCTYPE orders [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        b"<orders><order><id>&xxe;</id></order></orders>"
    ),
    "xxe_param": (
        b'<!DOCTYPE orders [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>'
        b"<orders><order><id>1</id></order></orders>"
    ),
    "external_dtd": (
        b'<!DOCTYPE orders SYSTEM "http://127.0.0.1:9/x.dtd"><orders><order><id>&x;</id>'
        b"</order><order><id>2</id></order></orders>"
    ),
    "laughs": (
        '<!DOCTYPE orders [<!ENTITY l0 "lol">'
        + "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
        + ']><orders><order a="&l9;"><id>&l9;</id></order></orders>'
    ).encode(),
    "quadratic": (
        f'<!DOCTYPE orders [<!ENTITY a "{"x" * 5000}">]><orders><order><id>'
        + "&a;" * 5000
        + "</id></order></orders>"
    ).encode(),
    "xinclude": (
        b'<orders xmlns:xi="http://www.w3.org/2001/XInclude"><order>'
        b'<xi:include href="file:///etc/passwd" parse="text"/></order></orders>'
    ),
    "mixed_shapes": (
        b"<orders><order><a>1</a></order><order><a>1</a><a>2</a></order>"
        b"<order><a><b>1</b></a></order><order a='1'>text<a/></order></orders>"
    ),
    "empty_root": b"<orders/>",
    "no_records": b"<orders><other><x>1</x></other></orders>",
    "record_is_root": b"<order><id>1</id></order>",
}

_TOKENS = [
    b"<!ENTITY x 'y'>",
    b"&x;",
    b"&#0;",
    b"&#x10FFFF;",
    b"<![CDATA[",
    b"]]>",
    b"<?",
    b"?>",
    b"</",
    b"<order>",
    b"</order>",
    b"<a",
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"<!--",
    b"-->",
    b'"',
    b"'",
    b"=",
    b"<!DOCTYPE orders>",
    b"xmlns:a='u'",
    b"a:b",
]


def mutations(seed: bytes, rng: random.Random, n: int) -> Iterator[bytes]:
    """``n`` deterministic mutations of ``seed``."""
    for _ in range(n):
        data = bytearray(seed)
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(5)
            at = rng.randrange(len(data) + 1)
            if kind == 0:
                del data[at:]
            elif kind == 1 and data:
                data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
            elif kind == 2:
                del data[at : at + rng.randint(1, 40)]
            elif kind == 3:
                span = data[at : at + rng.randint(1, 200)]
                data[at:at] = bytes(span) * rng.randint(2, 20)
            else:
                data[at:at] = rng.choice(_TOKENS)
        yield bytes(data)


def regenerate(per_seed: int = 6) -> None:
    """Rewrite the committed corpus: the seeds and their mutations."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("*.xml"):
        old.unlink()
    rng = random.Random(20_261_205)
    for name, seed in SEEDS.items():
        (CORPUS / f"{name}.xml").write_bytes(seed)
        for i, data in enumerate(mutations(seed, rng, per_seed)):
            (CORPUS / f"{name}-m{i}.xml").write_bytes(data)


def attacks(directory: Path) -> list[Path]:
    """Large hostile inputs, written to ``directory`` (each a few MiB at most)."""
    cases = {
        "deep": b"<orders><order>" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</order></orders>",
        "deep_outside": b"<orders>" + b"<a>" * 5_000 + b"</a>" * 5_000 + b"</orders>",
        "wide": b"<orders><order>" + b"<t>x</t>" * 400_000 + b"</order></orders>",
        "wide_names": b"<orders><order>"
        + b"".join(b"<f%d>1</f%d>" % (i, i) for i in range(100_000))
        + b"</order></orders>",
        "attributes": b"<orders><order "
        + b" ".join(b'a%d="1"' % i for i in range(200_000))
        + b"/></orders>",
        "long_text": b"<orders><order><t>" + b"x" * 12_000_000 + b"</t></order></orders>",
        "long_name": b"<orders><order><"
        + b"n" * 100_000
        + b">1</"
        + b"n" * 100_000
        + b"></order></orders>",
        "many_records": b"<orders>" + b"<order><id>1</id></order>" * 200_000 + b"</orders>",
        "outside_bulk": b"<orders><header>"
        + b"<h>x</h>" * 400_000
        + b"</header>"
        + b"<order><id>1</id></order></orders>",
        "big_records": b"<orders>"
        + (b"<order>" + b"<t>" + b"y" * 1_000_000 + b"</t>" * 1 + b"</order>") * 8
        + b"</orders>",
        "unclosed": b"<orders>" + b"<order><id>1</id>" * 50_000,
        "prolog_comment": b"<!--" + b"c" * 3_000_000 + b"--><orders/>",
    }
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in cases.items():
        path = directory / f"{name}.xml"
        path.write_bytes(data)
        paths.append(path)
    return paths


class _File:
    """A local file as the reader's target."""

    def __init__(self, path: Path) -> None:
        self.path = self.name = str(path)

    def source(self) -> str:
        return self.path

    def open(self) -> IO[bytes]:
        return open(self.path, "rb")  # noqa: SIM115 - the reader closes it

    def stream(self) -> pa.NativeFile:
        return pa.input_stream(self.path)


def _read_one(path: Path) -> dict[str, object]:
    from thalweg_bytewax.connectors.files._common import ReadOptions
    from thalweg_bytewax.connectors.files._xml import read_xml

    schema = pa.schema([("@id", pa.int64()), ("tag", pa.list_(pa.string())), ("id", pa.string())])
    rows = bad = 0
    error = None
    for given in (None, schema):
        try:
            options = ReadOptions(given, 1000)
            for chunk in read_xml(_File(path), 0, options, record_path=RECORD_PATH):
                rows += 0 if chunk.rows is None else chunk.rows.num_rows
                bad += len(chunk.bad)
        except Exception as exc:  # noqa: BLE001 - what escapes is the finding
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"file": path.name, "rows": rows, "bad": bad, "error": error, "peak": peak}


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str]) -> None:
    """Read each file under the cap, one JSON line per file."""
    if argv[:1] == ["--regenerate"]:
        regenerate()
        return
    cap = int(argv[0]) * _MIB
    import pyarrow.compute  # noqa: F401 - loaded before the cap is measured

    importlib.import_module("lxml.etree")

    from thalweg_bytewax.connectors.files import _xml  # noqa: F401

    limit = _vm_size() + cap
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for name in argv[1:]:
        print(json.dumps(_read_one(Path(name))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
