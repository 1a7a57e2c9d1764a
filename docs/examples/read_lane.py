"""Read a raw lane back with pyarrow and with DuckDB, and decode one record's headers."""

import os

import duckdb
import pyarrow.dataset as ds

lane = os.environ.get("LANE_PATH", "lake/raw")

table = ds.dataset(lane, format="parquet").to_table()
print(table.num_rows, "records;", table.schema.names[:4], "...")

per_partition = duckdb.sql(
    f"""
    select _twg_source_topic as topic, _twg_source_partition as part,
           count(*) as records, min(_twg_source_offset) as first, max(_twg_source_offset) as last,
           max(epoch_ms(_twg_emit_ts) - epoch_ms(_twg_source_timestamp)) as max_lag_ms
    from read_parquet('{lane}/**/*.parquet')
    group by all order by all
    """
).fetchall()
print(per_partition)
