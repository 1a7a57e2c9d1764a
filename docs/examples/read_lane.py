"""Read a raw lane back with thalweg's lane readers and with DuckDB.

Run: THALWEG_RAW_LANE=lake/raw python docs/examples/read_lane.py
"""

import duckdb

from thalweg_bytewax.config import Settings
from thalweg_bytewax.lanes import lane_stats, read_lane


class ExampleSettings(Settings):
    """Read from THALWEG_RAW_LANE."""

    component = "docs.examples.read_lane"

    raw_lane: str = "lake/raw"


lane = ExampleSettings.load().raw_lane

table = read_lane(lane)  # finalized files only; the same reader serves every lane
print(table.num_rows, "records;", table.schema.names[:4], "...")
for row in lane_stats(lane).to_pylist():  # what `thalweg lane stats` prints
    print(row["topic"], row["partition"], row["records"], row["first_offset"], row["last_offset"])

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
