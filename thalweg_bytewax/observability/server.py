"""One small HTTP server per flow process: ``/health /ready /live /stats /metrics``.

Standard library only (``http.server`` in a daemon thread), started only when a port is
configured (``THALWEG_HTTP_PORT`` or :func:`serve`), bound to ``127.0.0.1`` by default.
Port 0 binds any free port; :attr:`ObservabilityServer.port` reads it back.

- ``GET /health`` — the health tree as JSON; 200 while nothing is down, else 503.
- ``GET /ready`` — 200 while no readiness-critical component (source, raw lane) is
  down, else 503 with the reasons.
- ``GET /live`` — 200 unless the process recorded unrecoverable state.
- ``GET /stats`` — JSON counters and the 30 s rolling per-stage digest.
- ``GET /metrics`` — Prometheus text of ``prometheus_client``'s registry.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from thalweg_bytewax.errors import ConfigError

from .health import HealthRegistry, Status, registry
from .meters import metrics

__all__ = ["ObservabilityServer", "serve"]

logger = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        health = self.server.health
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        if path == "/health":
            tree = health.tree()
            self._json(503 if tree["status"] == Status.DOWN else 200, tree)
        elif path == "/ready":
            ready, reasons = health.ready()
            self._json(200 if ready else 503, {"ready": ready, "reasons": reasons})
        elif path == "/live":
            live, reason = health.live()
            self._json(200 if live else 503, {"live": live, "reason": reason})
        elif path == "/stats":
            m = metrics()
            self._json(200, m.stats() if m is not None else {"metrics": "off"})
        elif path == "/metrics":
            self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
        else:
            self._json(404, {"error": f"no such endpoint `{path}`", "endpoints": _ENDPOINTS})

    def _json(self, code: int, body: Any) -> None:
        self._send(code, json.dumps(body, indent=1).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        logger.debug("observability server: " + format, *args)


_ENDPOINTS = ["/health", "/ready", "/live", "/stats", "/metrics"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    health: HealthRegistry


class ObservabilityServer:
    """The running server; :meth:`close` stops it.

    Args:
        host: The interface to bind.
        port: The port (0: any free port).
        health: The health registry to serve (the process's by default).

    Raises:
        ConfigError: When the address cannot be bound.
    """

    def __init__(self, host: str, port: int, *, health: HealthRegistry = registry) -> None:
        try:
            self._httpd = _Server((host, port), _Handler)
        except OSError as exc:
            msg = (
                f"observability server: cannot bind `{host}:{port}` ({exc.strerror}); "
                "choose a free port, or 0 for any"
            )
            raise ConfigError(msg) from exc
        self._httpd.health = health
        self.host = host
        self.port: int = self._httpd.server_address[1]
        """The bound port (the chosen one when 0 was asked for)."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="thalweg-http", daemon=True
        )
        self._thread.start()
        logger.info("observability server on http://%s:%s", host, self.port)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def serve(*, port: int, host: str = "127.0.0.1") -> ObservabilityServer:
    """Start the server on ``host:port`` in a daemon thread and return it.

    Args:
        port: The port; 0 binds any free one (read it back from ``.port``).
        host: The interface (loopback by default; ``0.0.0.0`` in a container).

    Raises:
        ConfigError: On a port outside 0..65535 or one that cannot be bound.
    """
    if not 0 <= port <= 65535:
        msg = f"observability server: `port` expected 0..65535; got {port!r}"
        raise ConfigError(msg)
    return ObservabilityServer(host, port)
