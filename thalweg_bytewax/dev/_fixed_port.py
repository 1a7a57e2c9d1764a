"""A fixed local bootstrap port in front of librdkafka's mock cluster.

The mock cluster listens on ports the operating system picks: librdkafka's configuration
has ``test.mock.num.brokers`` and ``test.mock.broker.rtt`` but no port. ``thalweg dev
broker --port N`` listens on ``127.0.0.1:N`` itself and relays each connection to the
first mock broker. A Kafka client uses the bootstrap address only to learn the brokers
(metadata); it then connects to each broker at the address the metadata gives, so the
relay carries little traffic and every client on this host works unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading

from thalweg_bytewax.errors import ConfigError

__all__ = ["Relay", "listen"]

MAX_CONNECTIONS = 64
"""Connections relayed at once; more wait in the listen backlog."""
_CHUNK = 64 * 1024


def listen(port: int) -> socket.socket:
    """Bind ``127.0.0.1:port`` (before the cluster starts, so a taken port fails first).

    Raises:
        ConfigError: When the port is taken or cannot be bound, naming it.
    """
    if not 1 <= port <= 65_535:
        msg = f"dev broker: `--port {port}` expected a TCP port, 1..65535"
        raise ConfigError(msg)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("127.0.0.1", port))
    except OSError as exc:
        server.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        msg = (
            f"dev broker: port {port} on 127.0.0.1 {why}; stop what listens there "
            "(e.g. another `thalweg dev broker`) or choose another `--port`"
        )
        raise ConfigError(msg) from None
    server.listen(16)
    return server


class Relay:
    """Relay connections accepted on ``server`` to ``upstream`` (``host``, ``port``)."""

    def __init__(self, server: socket.socket, upstream: tuple[str, int]) -> None:
        self._server = server
        self._upstream = upstream
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._thread = threading.Thread(target=self._accept, name="relay-accept", daemon=True)

    @property
    def address(self) -> str:
        """``host:port`` clients bootstrap from."""
        host, port = self._server.getsockname()[:2]
        return f"{host}:{port}"

    def start(self) -> Relay:
        """Start accepting in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting; connections in flight end with the process."""
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while True:
            self._slots.acquire()
            try:
                client, _ = self._server.accept()
            except OSError:  # closed: stop
                self._slots.release()
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            try:
                broker = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                return
            broker.settimeout(None)
            back = threading.Thread(target=_pump, args=(broker, client), daemon=True)
            back.start()
            _pump(client, broker)
            back.join()
        finally:
            self._slots.release()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until either end closes, then close both directions."""
    try:
        while chunk := src.recv(_CHUNK):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            src.close()
