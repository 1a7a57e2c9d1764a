"""``python -m tests.connectors.flight.serve_table ROOT PORT``: a TableServer until killed."""

from __future__ import annotations

import sys

from thalweg_bytewax.flight.table_server import TableServer

if __name__ == "__main__":
    TableServer(sys.argv[1], f"grpc://127.0.0.1:{sys.argv[2]}").serve()
