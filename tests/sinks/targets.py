"""One face for every table sink: build it on a fresh target, read the target back.

The behaviour suite (``tests/sinks/test_behaviour.py``) runs each case against every
:class:`SinkTarget`: the Parquet lane, an Iceberg table (pyiceberg ``SqlCatalog`` on
SQLite), a PostgreSQL table (pgserver or ``THALWEG_TEST_PG_DSN``), an Arrow IPC
directory, a Kafka topic (librdkafka's mock cluster or ``THALWEG_TEST_KAFKA``, JSON
values) and an Arrow Flight target (the reference ``TableServer`` in this process, on a
free localhost port); the crash suite (``tests/sinks/test_crash.py``) runs all six too. A target knows how to build its sink
(``make``), how to read what it holds as Arrow (``read``), its columns and their types
and comments, a token of what it has committed, and what it can do (capability flags:
a case a sink cannot meet by design is skipped naming the capability, never for a
missing service).
"""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from bytewax.outputs import FixedPartitionedSink

from thalweg_bytewax.records.metadata import DEFAULT_COLUMNS

__all__ = [
    "ArrowIPCTarget",
    "C",
    "FlightTarget",
    "IcebergTarget",
    "KafkaTarget",
    "ParquetTarget",
    "PostgresTarget",
    "SinkTarget",
    "orders",
]

C = DEFAULT_COLUMNS
TOPIC = "orders"
BASE_US = 1_700_000_000_000_000  # 2023-11-14, UTC


def record_ids(topic: str, partition: int, offsets: Sequence[int], tag: str) -> pa.Array:
    """16-byte record ids: equal for equal (topic, partition, offset, tag)."""
    return pa.array(
        [
            hashlib.blake2b(f"{topic}/{partition}/{o}/{tag}".encode(), digest_size=16).digest()
            for o in offsets
        ],
        pa.binary(16),
    )


def orders(
    partition: int,
    offsets: Sequence[int],
    *,
    topic: str = TOPIC,
    tag: str = "v",
    extra: dict[str, pa.Array] | None = None,
) -> pa.RecordBatch:
    """A decoded batch of one source partition: payload, locator and record id.

    Payload: ``order_id`` (int64), ``customer`` (string), ``qty`` (int32), ``amount``
    (decimal(10, 2)), ``created_at`` (timestamp[us, UTC]); ``extra`` adds or replaces
    columns. Built columnar, so a 100k-row batch costs milliseconds but its record ids
    (a hash each): a batch without ``extra`` is built once per process and shared, as
    a record batch cannot be changed.
    """
    if extra is None:
        return _orders(partition, tuple(offsets), topic, tag)
    return _build_orders(partition, offsets, topic, tag, extra)


@functools.lru_cache(maxsize=256)
def _orders(partition: int, offsets: tuple[int, ...], topic: str, tag: str) -> pa.RecordBatch:
    return _build_orders(partition, offsets, topic, tag, {})


def _build_orders(
    partition: int, offsets: Sequence[int], topic: str, tag: str, extra: dict[str, pa.Array]
) -> pa.RecordBatch:
    offs = np.asarray(offsets, dtype=np.int64)
    n = len(offs)
    cols: dict[str, pa.Array] = {
        "order_id": pa.array(partition * 1_000_000 + offs, pa.int64()),
        "customer": pa.array([f"{tag}-c{o % 7}" for o in offs.tolist()], pa.string()),
        "qty": pa.array((offs % 5).astype(np.int32), pa.int32()),
        "amount": pa.array(offs * 101 % 100_000, pa.int64())
        .cast(pa.decimal128(19, 0))
        .cast(pa.decimal128(10, 2)),
        "created_at": pa.array(BASE_US + offs * 1_000_000, pa.timestamp("us")).cast(
            pa.timestamp("us", tz="UTC")
        ),
    }
    for name, values in extra.items():
        cols[name] = values
    cols[C.source_topic] = pa.array([topic] * n, pa.string())
    cols[C.source_partition] = pa.array(np.full(n, partition, dtype=np.int32), pa.int32())
    cols[C.source_offset] = pa.array(offs, pa.int64())
    cols[C.record_id] = record_ids(topic, partition, offs.tolist(), tag)
    return pa.RecordBatch.from_pydict(cols)


class SinkTarget(ABC):
    """A table sink on a fresh target, and the ways to look into that target.

    Attributes:
        name: ``parquet``, ``iceberg``, ``postgres``, ``arrow_ipc``, ``kafka`` or ``flight``.
        evolves: Provisions its target and evolves it (new columns with comments,
            incompatible changes refused before anything is written).
        checks_types: Casts rows to the target's column types at the write boundary
            and refuses what does not fit, naming the column.
        identifiers: Validates column names (strict or relaxed) and quotes them.
        comments: Keeps column comments (``comments=``) and the built-in ones.
        atomic_epochs: An epoch's rows become visible only when it commits (a Kafka
            topic shows produced records at once; its commit is the delivery check).
        fills_gaps: Reads back which source offsets the target holds, so a row inside
            the committed offsets that the target lacks is written, not skipped.
    """

    name: ClassVar[str]
    evolves: ClassVar[bool] = True
    comments: ClassVar[bool] = True
    checks_types: ClassVar[bool] = True
    identifiers: ClassVar[bool] = True
    atomic_epochs: ClassVar[bool] = True
    fills_gaps: ClassVar[bool] = False

    def __init__(self) -> None:
        self._open: list[Any] = []

    @property
    @abstractmethod
    def target(self) -> str:
        """How the sink's messages name the target (``test.orders``, ``schema.orders``)."""

    @abstractmethod
    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        """A new sink on this test's target (one shard unless ``shards`` is given).

        Common options: ``comments`` (column → comment), ``identifiers``
        (``"strict"``/``"relaxed"``), ``allow_widening``, ``shards``.
        """

    @abstractmethod
    def read(self) -> pa.Table:
        """Everything the target holds, as Arrow (no columns when it holds nothing)."""

    @abstractmethod
    def columns(self) -> dict[str, str]:
        """The target's column names and their types as the target spells them."""

    def comment(self, column: str) -> str | None:
        """The comment (doc) of a column, None when it has none."""
        return None

    @abstractmethod
    def committed(self) -> object:
        """A token of what the target has committed; equal tokens, nothing committed."""

    def part(self, sink: FixedPartitionedSink[pa.RecordBatch, Any], resume: Any = None) -> Any:
        """Build the sink's first partition (closed at teardown), as Bytewax would."""
        built = sink.build_part("flow.sink", "shard-000", resume)
        self._open.append(built)
        return built

    def offsets(self, state: Any) -> dict[str, int]:
        """The source offsets of a partition's snapshot (what the target holds per key)."""
        return dict(state)

    def close(self) -> None:
        """Close every partition built by :meth:`part`."""
        while self._open:
            self._open.pop().close()

    def record_ids(self) -> list[bytes]:
        """Every record id the target holds (duplicates kept), sorted."""
        table = self.read()
        if C.record_id not in table.column_names:
            return []
        return sorted(table.column(C.record_id).to_pylist())


class ParquetTarget(SinkTarget):
    """A Parquet lane in a fresh directory (``ParquetSink``); read with ``read_lane``."""

    name = "parquet"
    comments = False  # a lane's columns carry no comments
    checks_types = False  # no opt-in conversions: another zone is refused as another type
    identifiers = False  # column names are Parquet field names: any text, never SQL

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.path = root / "lane"

    @property
    def target(self) -> str:
        return str(self.path)

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.connectors.parquet import ParquetSink

        for unsupported in ("comments", "identifiers", "allow_widening"):
            options.pop(unsupported, None)
        options.setdefault("shards", 1)
        return ParquetSink(self.path, **options)

    def read(self) -> pa.Table:
        from thalweg_bytewax.lanes import read_lane

        if not self.committed():
            return pa.table({})
        return read_lane(self.path)

    def columns(self) -> dict[str, str]:
        return {f.name: str(f.type) for f in self.read().schema}

    def committed(self) -> object:
        if not self.path.exists():
            return ()
        return tuple(
            sorted(
                str(p.relative_to(self.path))
                for p in self.path.rglob("*.parquet")
                if not any(part.startswith((".", "_")) for part in p.relative_to(self.path).parts)
            )
        )


class IcebergTarget(SinkTarget):
    """The table ``test.orders`` in a fresh local warehouse (``IcebergSink``)."""

    name = "iceberg"

    def __init__(self, root: Path) -> None:
        from thalweg_bytewax.connectors.iceberg import IcebergCatalogConfig

        super().__init__()
        self.config = IcebergCatalogConfig(warehouse=str(root / "warehouse"))
        self.table = "test.orders"

    @property
    def target(self) -> str:
        return self.table

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.connectors.iceberg import IcebergSink

        return IcebergSink(self.config, options.pop("table", self.table), **options)

    def _table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.config.load().load_table(self.table)
        except NoSuchTableError:
            return None

    def read(self) -> pa.Table:
        table = self._table()
        return pa.table({}) if table is None else table.scan().to_arrow()

    def columns(self) -> dict[str, str]:
        table = self._table()
        if table is None:
            return {}
        return {f.name: str(f.field_type) for f in table.schema().fields}

    def comment(self, column: str) -> str | None:
        table = self._table()
        doc: str | None = table.schema().find_field(column).doc if table is not None else None
        return doc

    def committed(self) -> object:
        table = self._table()
        return () if table is None else tuple(s.snapshot_id for s in table.snapshots())


class PostgresTarget(SinkTarget):
    """The table ``orders`` in a fresh schema (``PostgresSink``); read through ADBC."""

    name = "postgres"

    def __init__(self, dsn: str, schema: str) -> None:
        super().__init__()
        self.dsn = dsn
        self.schema = schema
        self.table = "orders"

    @property
    def target(self) -> str:
        return f"{self.schema}.{self.table}"

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.connectors.postgres import PostgresSink
        from thalweg_bytewax.contracts.spec import ColumnSpec, ObjectSpec

        comments: dict[str, str] = options.pop("comments", None) or {}
        if comments:  # PostgreSQL takes its comments from a contract's descriptions
            options["contract"] = ObjectSpec(
                self.table,
                tuple(ColumnSpec(n, pa.string(), description=d) for n, d in comments.items()),
            )
        options.setdefault("schema", self.schema)
        options.setdefault("shards", 1)
        options.setdefault("retry_backoff", timedelta(seconds=0.01))
        return PostgresSink(self.dsn, options.pop("table", self.table), **options)

    def _query(self, query: str, *params: object) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.dsn) as conn:
            return conn.execute(query, params).fetchall()

    def read(self) -> pa.Table:
        import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped]
        from psycopg import sql

        if not self.columns():
            return pa.table({})
        query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(self.schema, self.table))
        with adbc.connect(self.dsn) as conn, conn.cursor() as cur:
            cur.execute(query.as_string(None))
            table: pa.Table = cur.fetch_arrow_table()
        return _numeric_as_decimal(table, self.columns())

    def columns(self) -> dict[str, str]:
        rows = self._query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            self.schema,
            self.table,
        )
        return {str(name): str(type_text) for name, type_text in rows}  # noqa: C416 - typed

    def comment(self, column: str) -> str | None:
        rows = self._query(
            "SELECT col_description(c.oid, a.attnum) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s",
            self.schema,
            self.table,
            column,
        )
        found: str | None = rows[0][0] if rows else None
        return found

    def committed(self) -> object:
        present = self._query(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = '_twg_coverage'",
            self.schema,
        )
        coverage: list[tuple[Any, ...]] = []
        if present[0][0]:
            coverage = self._query(
                f'SELECT sink, topic, partition, ranges::text FROM "{self.schema}"._twg_coverage '  # noqa: S608 - a test schema name
                "ORDER BY 1, 2, 3"
            )
        rows = self.read().num_rows if self.columns() else -1
        return (tuple(coverage), rows)


class ArrowIPCTarget(SinkTarget):
    """A fresh directory of Arrow IPC files (``ArrowIPCSink``); read as another process would."""

    name = "arrow_ipc"
    evolves = False  # a batch with another schema starts a new file: nothing to refuse
    comments = False
    checks_types = False
    identifiers = False

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.path = root / "ipc"

    @property
    def target(self) -> str:
        return str(self.path)

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.connectors.arrow_ipc import ArrowIPCSink

        for unsupported in ("comments", "identifiers", "allow_widening"):
            options.pop(unsupported, None)
        options.setdefault("shards", 1)
        return ArrowIPCSink(self.path, **options)

    def _files(self) -> list[Path]:
        if not self.path.exists():
            return []
        return sorted(
            p
            for p in self.path.rglob("*.arrow*")
            if not any(part.startswith((".", "_")) for part in p.relative_to(self.path).parts)
        )

    def read(self) -> pa.Table:
        import pyarrow.ipc as ipc

        tables = []
        for path in self._files():
            with pa.memory_map(str(path)) as f:  # a partial or truncated file raises
                reader = ipc.open_file(f) if path.suffix == ".arrow" else ipc.open_stream(f)
                tables.append(reader.read_all())
        if not tables:
            return pa.table({})
        return pa.concat_tables(tables, promote_options="default")

    def columns(self) -> dict[str, str]:
        return {f.name: str(f.type) for f in self.read().schema}

    def committed(self) -> object:
        return tuple(str(p.relative_to(self.path)) for p in self._files())


class KafkaTarget(SinkTarget):
    """A fresh topic (``KafkaSink`` with JSON values); read back with a plain consumer.

    A row read back is its JSON object, its locator header's topic, partition and offset
    and its record id; the payload columns of :func:`orders` are read as that schema's
    types, as a consumer with the schema would.
    """

    name = "kafka"
    evolves = False  # JSON values: each message carries its own fields
    comments = False
    checks_types = False
    identifiers = False
    atomic_epochs = False  # produced at once; the commit checks every delivery
    fills_gaps = True  # the output partitions are read back record by record on resume

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.topic = topic

    @property
    def target(self) -> str:
        return self.topic

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.codecs import JsonEncoder
        from thalweg_bytewax.connectors.kafka import KafkaSink

        for unsupported in ("comments", "identifiers", "allow_widening"):
            options.pop(unsupported, None)
        options.setdefault("shards", 1)
        options.setdefault("encoder", JsonEncoder())
        # Compressed batches: the mock cluster keeps about 5 MB per partition, and the
        # 100k-row case must stay whole in it to be read back.
        options.setdefault("librdkafka", {"compression.type": "zstd"})
        return KafkaSink([self.bootstrap], self.topic, **options)

    def offsets(self, state: Any) -> dict[str, int]:
        # The sink also keeps the end offset of each output partition it wrote, under a
        # key starting with NUL that no source partition key has (`out_state_key`).
        return {k: v for k, v in dict(state).items() if not k.startswith("\x00")}

    def read(self) -> pa.Table:
        import orjson

        from tests.connectors.kafka.kafka_sink_helpers import read_topic

        records = read_topic(self.bootstrap, self.topic)
        if not records:
            return pa.table({})
        rows = []
        for r in records:
            loc = r.packed
            row = orjson.loads(r.value or b"{}")
            row[C.source_topic], row[C.source_partition] = loc.topic, loc.partition
            row[C.source_offset], row[C.record_id] = loc.offset, loc.record_id
            rows.append(row)
        table = pa.Table.from_pylist(rows)
        payload = orders(0, [0]).schema
        for i, name in enumerate(table.column_names):
            if name in payload.names and name not in C.names:
                try:  # rows of another shape (the sample orders') keep what JSON gave
                    typed = table.column(i).cast(payload.field(name).type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
                table = table.set_column(i, name, typed)
        return table

    def columns(self) -> dict[str, str]:
        return {f.name: str(f.type) for f in self.read().schema}

    def committed(self) -> object:
        from tests.connectors.kafka.kafka_sink_helpers import read_topic

        return tuple(
            sorted((r.partition, r.offset) for r in read_topic(self.bootstrap, self.topic))
        )


class FlightTarget(SinkTarget):
    """The target ``orders`` on a reference Flight table server (``FlightSink``).

    The server (:class:`~thalweg_bytewax.flight.table_server.TableServer`) serves real
    Flight on a free localhost port from this process; what it holds is read back over
    Flight (``GetFlightInfo`` and ``DoGet``), as a ``FlightSource`` would.
    """

    name = "flight"
    evolves = False  # a batch with another schema opens a new stream: nothing to refuse
    comments = False  # Flight carries Arrow schemas, no column comments
    checks_types = False  # the server stores the Arrow types it is sent
    identifiers = False  # column names are Arrow field names: any text, never SQL
    atomic_epochs = False  # rows are held from their confirm, which may precede the commit
    # `twg.held` answers spans (first-last per stored confirm), as the other sinks' coverage
    # does: a row missing inside a span is found by the replay check, not written.

    def __init__(self, root: Path) -> None:
        from thalweg_bytewax.flight.table_server import TableServer

        super().__init__()
        self.server = TableServer(root / "flight").serve_in_thread()
        self.table = "orders"

    @property
    def location(self) -> str:
        """The server's ``grpc://127.0.0.1:<port>``."""
        return self.server.location

    @property
    def target(self) -> str:
        return self.table

    def make(self, **options: Any) -> FixedPartitionedSink[pa.RecordBatch, Any]:
        from thalweg_bytewax.connectors.flight import FlightSink

        for unsupported in ("comments", "identifiers", "allow_widening"):
            options.pop(unsupported, None)
        options.setdefault("shards", 1)
        options.setdefault("retry_for", timedelta(seconds=2))
        return FlightSink(self.location, options.pop("table", self.table), **options)

    def read(self) -> pa.Table:
        import pyarrow.flight as flight

        with flight.FlightClient(self.location) as client:
            info = client.get_flight_info(flight.FlightDescriptor.for_path(self.table))
            tables = [client.do_get(e.ticket).read_all() for e in info.endpoints]
        if not tables:
            return pa.table({})
        return pa.concat_tables(tables, promote_options="default")

    def columns(self) -> dict[str, str]:
        return {f.name: str(f.type) for f in self.read().schema}

    def committed(self) -> object:
        base = self.server.root / self.table
        if not base.is_dir():
            return ()
        return tuple(sorted(str(p.relative_to(base)) for p in base.rglob("*.arrows")))

    def close(self) -> None:
        """Close the partitions, then stop the server."""
        try:
            super().close()
        finally:
            self.server.shutdown()


def _numeric_as_decimal(table: pa.Table, types: dict[str, str]) -> pa.Table:
    """ADBC hands ``numeric(p,s)`` over as text (an opaque extension): read it as decimal."""
    for i, name in enumerate(table.column_names):
        spelled = types.get(name, "")
        if not spelled.startswith("numeric("):
            continue
        precision, scale = (int(x) for x in spelled[len("numeric(") : -1].split(","))
        column = table.column(i)
        storage = pa.chunked_array(
            [c.storage if isinstance(c, pa.ExtensionArray) else c for c in column.chunks],
            pa.string(),
        )
        table = table.set_column(i, name, storage.cast(pa.decimal128(precision, scale)))
    return table
