"""The Apache Kafka broker's jars: the version pinned, fetched with Maven once, cached.

``apache_kafka_pom.xml`` beside this module pins the version; :func:`fetch_jars` copies
its dependencies from Maven Central into a cache directory of your choice, where
:class:`~thalweg_bytewax.dev._apache_kafka.ApacheKafka` starts the broker from them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

from thalweg_bytewax.config import UNSET, Unset, duration_keyword
from thalweg_bytewax.errors import ConfigError

__all__ = [
    "KAFKA_VERSION",
    "POM",
    "cache_dir_or_default",
    "default_cache_dir",
    "fetch_jars",
    "missing_tools",
]

KAFKA_VERSION = "4.1.1"
"""The Apache Kafka version ``apache_kafka_pom.xml`` pins."""

POM = Path(__file__).with_name("apache_kafka_pom.xml")
"""The Maven project whose dependencies are the broker's jars."""


def missing_tools(*, need_maven: bool = True) -> str | None:
    """What is missing to run the broker (``None`` when nothing is), naming the tool."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if not need_maven and "mvn" in missing:
        missing.remove("mvn")
    if not missing:
        return None
    return (
        f"Apache Kafka {KAFKA_VERSION} needs {' and '.join(missing)} on the PATH "
        "(Java 17+ runs the broker; Maven fetches its jars from Maven Central once)"
    )


def fetch_jars(
    cache_dir: Path, *, timeout: timedelta | Unset = UNSET, timeout_s: float | Unset = UNSET
) -> Path:
    """The directory of the broker's jars under ``cache_dir``, fetched with Maven if absent.

    The jars land in ``cache_dir/<version>/jars``; a ``complete`` marker is written last,
    so an interrupted fetch is redone, never half used.

    Args:
        cache_dir: Where the jars are kept.
        timeout: How long Maven may take (default 10 minutes).
        timeout_s: Deprecated: ``timeout`` in seconds.

    Raises:
        ConfigError: Maven is missing or failed (its output is in the message), or
            ``timeout`` is no positive ``timedelta`` (or is given under both names).
    """
    bound = duration_keyword(
        "fetch_jars", "timeout", timeout, "timeout_s", timeout_s, default=timedelta(minutes=10)
    )
    root = cache_dir.resolve() / KAFKA_VERSION
    jars = root / "jars"
    if (root / "complete").is_file():
        return jars
    if shutil.which("mvn") is None:
        msg = (
            f"the Apache Kafka {KAFKA_VERSION} jars are not in `{jars}` and `mvn` is not on "
            "the PATH to fetch them; install Maven or copy the jars there"
        )
        raise ConfigError(msg)
    staging = root / "jars.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    proc = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
        ],
        capture_output=True,
        text=True,
        timeout=bound,
        check=False,
    )
    if proc.returncode != 0:
        msg = (
            f"fetching the Apache Kafka {KAFKA_VERSION} jars with Maven failed "
            f"(exit {proc.returncode}); Maven said:\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
        raise ConfigError(msg)
    shutil.rmtree(jars, ignore_errors=True)
    staging.rename(jars)
    (root / "complete").write_text(f"{len(list(jars.glob('*.jar')))} jars\n")
    return jars


def default_cache_dir() -> Path:
    """Where the jars are cached: ``THALWEG_KAFKA_CACHE`` or ``.thalweg/apache-kafka``."""
    return Path(os.environ.get("THALWEG_KAFKA_CACHE", str(Path(".thalweg") / "apache-kafka")))


def cache_dir_or_default(cache_dir: Path | None) -> Path:
    """``cache_dir``, or :func:`default_cache_dir` when it is None."""
    return cache_dir if cache_dir is not None else default_cache_dir()
