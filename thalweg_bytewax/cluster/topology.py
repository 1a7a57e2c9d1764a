"""Who this process is in the cluster, and where its peers are, from the pod's environment.

In a StatefulSet, pod ``NAME-N`` has the stable DNS name ``NAME-N.SERVICE`` through its
headless service, and ``N`` (the ordinal) is its Bytewax process id. So every pod derives
the same ``-a`` list, ``NAME-0.SERVICE:PORT;…;NAME-(SIZE-1).SERVICE:PORT``, and its own
``-i`` from its hostname.

* ``THALWEG_PROCESS_ID`` — this process's id; default: the ordinal ending the hostname.
* ``THALWEG_CLUSTER_SIZE`` — the number of processes (the StatefulSet's replicas).
* ``THALWEG_CLUSTER_SERVICE`` — the headless service's DNS name (``thalweg`` or
  ``thalweg.NAMESPACE.svc.cluster.local``).
* ``THALWEG_CLUSTER_NAME`` — the StatefulSet's name; default: the hostname without ``-N``.
* ``THALWEG_CLUSTER_PORT`` — the port every process listens on for its peers (2101).
* ``THALWEG_CLUSTER_ADDRESSES`` — instead of the three above, every process's
  ``HOST:PORT`` separated by ``;`` (hosts outside Kubernetes, or a test on one machine).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from thalweg_bytewax.errors import ConfigError

__all__ = ["DEFAULT_PORT", "ClusterError", "Topology", "setting_number", "topology_from_env"]

_N = TypeVar("_N", int, float)

DEFAULT_PORT = 2101
"""The port each process listens on for its peers when ``THALWEG_CLUSTER_PORT`` is unset."""

_ORDINAL = re.compile(r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-(?P<ordinal>[0-9]+)$")


class ClusterError(ConfigError):
    """The cluster cannot be formed as configured; the message says what to set or fix."""

    __module__ = "thalweg_bytewax.cluster"


@dataclass(frozen=True)
class Topology:
    """This process's place in the cluster.

    Attributes:
        process_id: This process's id, ``-i``.
        addresses: Every process's ``host:port``, in process-id order (``-a``).
    """

    process_id: int
    addresses: tuple[str, ...]

    @property
    def hosts(self) -> tuple[str, ...]:
        """The host part of every address, in process-id order."""
        return tuple(a.rsplit(":", 1)[0] for a in self.addresses)

    @property
    def size(self) -> int:
        """The number of processes."""
        return len(self.addresses)

    def runner_args(self) -> list[str]:
        """``-i ID -a ADDRESSES`` for ``python -m bytewax.run``."""
        return ["-i", str(self.process_id), "-a", ";".join(self.addresses)]


def setting_number(
    name: str,
    raw: str | None,
    parse: Callable[[str], _N],
    *,
    minimum: int,
    what: str = "an integer",
    unit: str = "",
) -> _N | None:
    """The number a cluster setting holds; ``None`` when it is unset or blank.

    Args:
        name: The setting's variable, for the messages (``THALWEG_CLUSTER_SIZE``).
        raw: The setting's text, ``None`` when unset.
        parse: ``int`` or ``float``.
        minimum: The smallest value the setting takes.
        what: What the setting holds, for the messages (``"a number of seconds"``).
        unit: The unit of ``minimum`` in the messages (``"seconds"``), if any.

    Raises:
        ClusterError: The text is not such a number, or it is below ``minimum``.
    """
    text = (raw or "").strip()
    if not text:
        return None
    try:
        value = parse(text)
    except ValueError:
        msg = f"{name}={text!r} is not {what}; set it to one"
        raise ClusterError(msg) from None
    if value < minimum:
        more = f"{minimum} or more {unit}".rstrip()
        msg = f"{name}={text} is below {minimum}; set it to {more}"
        raise ClusterError(msg)
    return value


def _int(env: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    return setting_number(name, env.get(name), int, minimum=minimum)


def _split_addresses(raw: str) -> tuple[str, ...]:
    addresses = tuple(a.strip() for a in re.split(r"[;,]", raw) if a.strip())
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            msg = (
                f"THALWEG_CLUSTER_ADDRESSES holds {address!r}, not HOST:PORT; "
                "list every process as HOST:PORT separated by ';'"
            )
            raise ClusterError(msg)
    return addresses


def _name_and_ordinal(hostname: str) -> tuple[str, int]:
    match = _ORDINAL.match(hostname.split(".", 1)[0])
    if match is None:
        msg = (
            f"the hostname {hostname!r} does not end in a StatefulSet ordinal (NAME-N); "
            "run under a StatefulSet or set THALWEG_PROCESS_ID"
        )
        raise ClusterError(msg)
    return match["name"], int(match["ordinal"])


def topology_from_env(env: Mapping[str, str], hostname: str) -> Topology:
    """Derive this process's id and the cluster's addresses (see the module's table).

    Args:
        env: The environment, e.g. ``os.environ``.
        hostname: This host's name, e.g. ``socket.gethostname()`` (``NAME-N`` in a
            StatefulSet's pod).

    Returns:
        The topology; ``addresses`` has one entry per process.

    Raises:
        ClusterError: A variable is missing or invalid, the hostname carries no ordinal
            and ``THALWEG_PROCESS_ID`` is unset, or the process id is not below the size.
    """
    process_id = _int(env, "THALWEG_PROCESS_ID", minimum=0)
    explicit = env.get("THALWEG_CLUSTER_ADDRESSES", "").strip()
    if explicit:
        addresses = _split_addresses(explicit)
        if process_id is None:
            process_id = _name_and_ordinal(hostname)[1]
    else:
        size = _int(env, "THALWEG_CLUSTER_SIZE", minimum=1)
        service = env.get("THALWEG_CLUSTER_SERVICE", "").strip()
        if size is None or not service:
            msg = (
                "set THALWEG_CLUSTER_SIZE (the StatefulSet's replicas) and "
                "THALWEG_CLUSTER_SERVICE (its headless service), or list every process "
                "in THALWEG_CLUSTER_ADDRESSES"
            )
            raise ClusterError(msg)
        port = _int(env, "THALWEG_CLUSTER_PORT", minimum=1) or DEFAULT_PORT
        name = env.get("THALWEG_CLUSTER_NAME", "").strip()
        if not name or process_id is None:
            derived_name, ordinal = _name_and_ordinal(hostname)
            name = name or derived_name
            process_id = ordinal if process_id is None else process_id
        addresses = tuple(f"{name}-{i}.{service}:{port}" for i in range(size))
    if process_id >= len(addresses):
        msg = (
            f"process id {process_id} is not below the cluster's size {len(addresses)}; "
            "THALWEG_CLUSTER_SIZE must equal the StatefulSet's replicas"
        )
        raise ClusterError(msg)
    return Topology(process_id, addresses)
