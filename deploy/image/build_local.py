#!/usr/bin/env python3
"""Build the thalweg image where no image registry is reachable, then run it.

The Dockerfile starts from the official Python images; a machine that cannot pull them
(no route to a registry) can still build the image from two bases it makes from
Debian's package mirror, with podman:

- ``localhost/thalweg-base:bookworm-slim`` (the runtime's base, like
  ``python:3.11-slim-bookworm``): ``debootstrap --variant=minbase bookworm`` with
  Debian's Python 3.11 and its ``venv`` module, security updates applied, no compiler;
- ``localhost/thalweg-base:bookworm-build`` (the builder's base, like
  ``python:3.11-bookworm``): the slim base plus pip, the Python headers, a C compiler and
  OpenSSL's headers.

Then the repository's Dockerfile is built on them (``--build-arg BUILDER_BASE=...
RUNTIME_BASE=...``, nothing else changed; without podman's layer cache unless
``--cache``: Buildah 1.28 keys the runtime's ``RUN --mount=...,from=builder`` step by its
text, not by the builder's wheels, so a cached build can hold an older package) and the
image is checked: its user and entry point, no compiler, the compiled extensions, that
its package is this checkout's, ``thalweg --help``, the flagship flow
(``thalweg run orders``) and, unless ``--no-cluster``, the StatefulSet's container run
as two containers forming a cluster (host network, a loopback address each, a read-only
root file system, every capability dropped). Each result is printed as it comes, then a
summary; docs/deploy.md gives the output of a run.

Run it as root (debootstrap and podman's default storage need root)::

    python3 deploy/image/build_local.py                 # bases (once), image, checks
    python3 deploy/image/build_local.py --no-cluster    # without the cluster check
    python3 deploy/image/build_local.py --rebuild-bases # make the bases again
    python3 deploy/image/build_local.py --cache         # reuse podman's layer cache

Needs: podman, an OCI runtime (crun or runc), debootstrap, and the host's way to the
package index: the build's ``RUN`` steps use the host's network, and the builder base
carries the host's CA bundle (``--ca-bundle``, by default pip's) and
``PIP_INDEX_URL``/``PIP_EXTRA_INDEX_URL``/``PIP_TRUSTED_HOST`` in its ``/etc/pip.conf``
(made again when they change). None of it reaches the image: its runtime stage installs
the builder's wheels without the index. Exit codes: 0 every check passed, 1 a check
failed, 2 a tool is missing (no container engine: nothing was built), 3 the engine
cannot run a container on this machine (its errors are printed).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "bookworm"
SLIM_BASE = f"localhost/thalweg-base:{RELEASE}-slim"
BUILD_BASE = f"localhost/thalweg-base:{RELEASE}-build"
# What the slim base adds to Debian's minimal base: the interpreter, `python -m venv`,
# `python` as a command (the official images have it) and the CA certificates.
SLIM_PACKAGES = ["python3", "python3-venv", "python-is-python3", "ca-certificates"]
# What the builder adds: pip, the headers and the compiler the C extensions need.
BUILD_PACKAGES = ["python3-pip", "python3-dev", "gcc", "libc6-dev", "libssl-dev"]


def setup_extensions(setup_py: Path = ROOT / "setup.py") -> list[str]:
    """The compiled extensions setup.py builds, by module name, in its order.

    Read from its ``Extension("name", ...)`` calls, so an extension added there is
    checked in the image without anyone remembering to list it here.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(setup_py.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Extension"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(node.args[0].value)
    return found


# The compiled extensions the image must import (the Dockerfile's runtime stage does too).
EXTENSIONS = setup_extensions()
COMPILERS = ["gcc", "cc", "c++", "g++", "clang", "tcc", "x86_64-linux-gnu-gcc-12"]
IMAGE_USER = "10001:10001"
# A digest of a package's Python sources, computed the same way in the checkout and in
# the image: equal when the image holds this checkout's code.
DIGEST_CODE = """
import hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
digest = hashlib.sha256()
for p in files:
    digest.update(p.relative_to(root).as_posix().encode() + b"\\0" + p.read_bytes() + b"\\0")
print(digest.hexdigest(), len(files))
"""
SITE_PACKAGE = "/opt/venv/lib/python3.11/site-packages/thalweg_bytewax"
# The container's command and plain variables in deploy/kubernetes/base/statefulset.yaml
# (tests/project/test_container_image.py keeps them equal); each "pod" of the cluster
# check gets them.
POD_ARGS = ["cluster", "pipeline"]
POD_ENV = {
    "THALWEG_CLUSTER_SIZE": "2",
    "THALWEG_CLUSTER_SERVICE": "thalweg-peers",
    "THALWEG_CLUSTER_PORT": "2101",
    "THALWEG_RECOVERY_DIR": "/data/recovery",
    "THALWEG_RECOVERY_PARTITIONS": "8",
    "THALWEG_SNAPSHOT_INTERVAL_S": "30",
    "THALWEG_CONFIG": "/etc/thalweg/pipeline.toml",
    "THALWEG_HTTP_PORT": "9464",
    "THALWEG_HTTP_HOST": "0.0.0.0",  # noqa: S104 - the kubelet and Prometheus
}
CLUSTER_RECORDS = 400
# Where the builder base keeps this host's CA bundle for pip, and the label recording
# which settings it was made with (a change makes it again).
BUILD_CA = "/etc/thalweg-build/ca-certificates.crt"
DIGEST_LABEL = "org.thalweg.build.pip-settings"


class Fatal(Exception):
    """A stop before the checks: the message says what is missing, ``code`` the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Engine:
    """How podman runs a container here: global options and per-container options."""

    global_opts: list[str] = field(default_factory=list)
    run_opts: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """The options chosen, as a command line fragment."""
        return " ".join(["podman", *self.global_opts, "run", *self.run_opts]) or "podman run"


@dataclass
class Report:
    """The checks' results and the steps' times, printed as a summary at the end."""

    results: list[tuple[str, bool, str]] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str) -> bool:
        """Record and print one check."""
        self.results.append((name, ok, detail))
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)
        return ok

    def timed(self, name: str, started: float) -> float:
        """Record how long the step ``name`` took since ``started``."""
        took = time.monotonic() - started
        self.timings.append((name, took))
        print(f"  ({name}: {took:.0f} s)", flush=True)
        return took

    @property
    def failed(self) -> bool:
        """Whether any check failed."""
        return not all(ok for _, ok, _ in self.results)


def run(
    cmd: Sequence[str], *, check: bool = True, timeout: float = 3600, stdin: IO[bytes] | None = None
) -> str:
    """Run ``cmd``, return its stdout; on failure raise naming the command and its stderr."""
    done = subprocess.run(
        list(cmd), capture_output=True, text=True, timeout=timeout, check=False, stdin=stdin
    )
    if check and done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        msg = f"`{' '.join(cmd)}` exited {done.returncode}:\n{tail}"
        raise RuntimeError(msg)
    return done.stdout


def stream(cmd: Sequence[str], log: Path) -> int:
    """Run ``cmd`` with its output to ``log``; print its steps (all the last lines if it fails)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            out.write(line)
            tail = [*tail[-14:], line]
            if line.startswith(("STEP ", "[", "Successfully tagged")):
                print(f"    {line[:160].rstrip()}", flush=True)
        code = proc.wait()
        if code != 0:
            print("".join(f"    {t}" for t in tail), end="", flush=True)
        return code


def image_exists(name: str) -> bool:
    """Whether podman's storage holds the image ``name``."""
    return subprocess.run(["podman", "image", "exists", name], check=False).returncode == 0


def image_id(name: str) -> str | None:
    """The id of the image ``name`` in podman's storage, None when there is none."""
    done = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def require_tools(need_bases: bool) -> None:
    """Stop (exit 2) naming each tool this machine lacks."""
    if shutil.which("podman") is None:
        docker = shutil.which("docker")
        extra = f" ({docker} is present, but this script builds with podman)" if docker else ""
        msg = (
            "no container engine: podman is not installed" + extra + ", so no image was "
            "built. On Debian or Ubuntu: apt-get install podman runc debootstrap"
        )
        raise Fatal(msg, 2)
    if need_bases:
        if shutil.which("debootstrap") is None:
            msg = "debootstrap is not installed: it makes the bases (apt-get install debootstrap)"
            raise Fatal(msg, 2)
        if os.geteuid() != 0:
            msg = "making the base images needs root (debootstrap): run this script as root"
            raise Fatal(msg, 2)


def make_slim_base(work: Path, mirror: str, security: str, report: Report) -> None:
    """Debootstrap a minimal Debian with Python 3.11 and import it as the slim base."""
    started = time.monotonic()
    rootfs = work / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    print(f"making {SLIM_BASE}: debootstrap --variant=minbase {RELEASE} from {mirror}", flush=True)
    include = ",".join(SLIM_PACKAGES)
    run(["debootstrap", "--variant=minbase", f"--include={include}", RELEASE, str(rootfs), mirror])
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {mirror} {RELEASE} main\n"
        f"deb {mirror} {RELEASE}-updates main\n"
        f"deb {security} {RELEASE}-security main\n"
    )
    script = (
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -y -qq upgrade"
        " && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin"
    )
    run(["chroot", str(rootfs), "sh", "-c", script])
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    run(["podman", "import", "--change", 'CMD ["python"]', "-", SLIM_BASE], stdin=tar.stdout)
    if tar.wait() != 0:
        msg = f"tar of {rootfs} failed"
        raise RuntimeError(msg)
    shutil.rmtree(rootfs)
    report.timed(f"base {SLIM_BASE}", started)


def pick_engine() -> Engine:
    """The first way podman runs a container of the slim base here; exit 3 if none does."""
    hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard_nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    # Without the right to raise limits (CAP_SYS_RESOURCE), podman's default limits
    # (above this machine's) fail at start; these are the host's own.
    ulimits = [
        "--ulimit",
        f"nofile={hard_nofile}:{hard_nofile}",
        "--ulimit",
        f"nproc={min(hard_nproc, pid_max)}:{min(hard_nproc, pid_max)}",
    ]
    runtimes: list[list[str]] = [[]] + [
        ["--runtime", name] for name in ("runc", "crun") if shutil.which(name)
    ]
    errors = []
    for global_opts in runtimes:
        for run_opts in ([], ulimits):
            engine = Engine(global_opts, run_opts)
            done = subprocess.run(
                ["podman", *global_opts, "run", "--rm", *run_opts, SLIM_BASE, "true"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode == 0:
                print(f"containers run with: {engine.describe()}", flush=True)
                return engine
            errors.append(f"{engine.describe()} {SLIM_BASE} true\n    {done.stderr.strip()}")
    msg = "podman cannot run a container here; each way tried:\n  " + "\n  ".join(errors)
    raise Fatal(msg, 3)


def pip_settings(ca_bundle: Path | None) -> tuple[str, bytes]:
    """The builder's ``pip.conf`` and CA bundle: what this host's pip reaches the index with."""
    lines = ["[global]"]
    if ca_bundle is not None:
        lines.append(f"cert = {BUILD_CA}")
    for var, key in (
        ("PIP_INDEX_URL", "index-url"),
        ("PIP_EXTRA_INDEX_URL", "extra-index-url"),
        ("PIP_TRUSTED_HOST", "trusted-host"),
    ):
        if os.environ.get(var):
            lines.append(f"{key} = {os.environ[var]}")
    return "\n".join(lines) + "\n", ca_bundle.read_bytes() if ca_bundle is not None else b""


def settings_digest(pip_conf: str, ca: bytes) -> str:
    """What the builder base's label records of its pip settings."""
    return hashlib.sha256(pip_conf.encode() + b"\0" + ca).hexdigest()


def build_base_is_current(digest: str) -> bool:
    """Whether the builder base exists and carries these pip settings."""
    if not image_exists(BUILD_BASE):
        return False
    (meta,) = json.loads(run(["podman", "image", "inspect", BUILD_BASE]))
    return bool((meta["Config"].get("Labels") or {}).get(DIGEST_LABEL) == digest)


def make_build_base(engine: Engine, work: Path, pip_conf: str, ca: bytes, report: Report) -> None:
    """Build the builder's base on the slim base: pip, headers, a C compiler, pip's settings.

    The settings (this host's CA bundle and index) are the builder base's alone: the
    runtime stage installs the builder's wheels without the index, so nothing of them
    reaches the image.
    """
    started = time.monotonic()
    context = work / "build-base"
    if context.exists():
        shutil.rmtree(context)
    context.mkdir()
    (context / "pip.conf").write_text(pip_conf)
    (context / "ca-certificates.crt").write_bytes(ca)
    (context / "Containerfile").write_text(
        f"FROM {SLIM_BASE}\n"
        f"LABEL {DIGEST_LABEL}={settings_digest(pip_conf, ca)}\n"
        "RUN apt-get update -qq \\\n"
        "    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\\n"
        f"       {' '.join(BUILD_PACKAGES)} \\\n"
        "    && apt-get clean && rm -rf /var/lib/apt/lists/*\n"
        "COPY pip.conf /etc/pip.conf\n"
        f"COPY ca-certificates.crt {BUILD_CA}\n"
    )
    print(f"making {BUILD_BASE}: {' '.join(BUILD_PACKAGES)} on {SLIM_BASE}", flush=True)
    cmd = ["podman", *engine.global_opts, "build", *engine.run_opts, "--pull=never"]
    cmd += ["--network", "host", "-t", BUILD_BASE, str(context)]
    code = stream(cmd, work / "build-base.log")
    if code != 0:
        msg = f"building {BUILD_BASE} failed (exit {code}); its log: {work / 'build-base.log'}"
        raise RuntimeError(msg)
    report.timed(f"base {BUILD_BASE}", started)


def default_ca_bundle() -> Path | None:
    """The CA bundle this host's pip uses (PIP_CERT and the like, else the system's)."""
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.environ.get(var) and Path(os.environ[var]).is_file():
            return Path(os.environ[var])
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    return system if system.is_file() else None


def build_image(engine: Engine, image: str, work: Path, report: Report, *, cache: bool) -> None:
    """Build the repository's Dockerfile on the local bases, nothing else changed."""
    started = time.monotonic()
    previous = image_id(image)
    cmd = ["podman", *engine.global_opts, "build", *engine.run_opts, "--pull=never"]
    # Without the cache, no layer images are kept either (the builder stage's among them).
    cmd += [] if cache else ["--no-cache", "--layers=false"]
    cmd += ["--network", "host"]
    cmd += ["--build-arg", f"BUILDER_BASE={BUILD_BASE}", "--build-arg", f"RUNTIME_BASE={SLIM_BASE}"]
    cmd += ["-f", str(ROOT / "Dockerfile"), "-t", image, str(ROOT)]
    print("building:", " ".join(cmd), flush=True)
    code = stream(cmd, work / "build.log")
    took = report.timed(f"image {image}", started)
    if not report.check(
        "build", code == 0, f"exit {code} in {took:.0f} s, log {work / 'build.log'}"
    ):
        msg = "the image did not build"
        raise Fatal(msg, 1)
    if previous is not None and previous != image_id(image):
        # The image this build replaced, now untagged; kept if a container still uses it.
        subprocess.run(["podman", "rmi", previous], capture_output=True, check=False)


def podman_run(
    engine: Engine, *args: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``podman run --rm`` with this machine's options; output captured."""
    return subprocess.run(
        ["podman", *engine.global_opts, "run", "--rm", *engine.run_opts, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def check_image(engine: Engine, image: str, report: Report) -> None:
    """The image's metadata, user, entry point, compiler-free runtime and extensions."""
    (meta,) = json.loads(run(["podman", "image", "inspect", image]))
    config = meta["Config"]
    labels = config.get("Labels") or {}
    size_mb = meta["Size"] / 1e6
    report.check("size", True, f"{size_mb:.0f} MB ({meta['Size']} bytes)")
    report.check("configured user", config.get("User") == IMAGE_USER, f"User={config.get('User')}")
    report.check(
        "entry point",
        config.get("Entrypoint") == ["thalweg"],
        f"Entrypoint={config.get('Entrypoint')} Cmd={config.get('Cmd')}",
    )
    base = labels.get("org.opencontainers.image.base.name")
    report.check("base label", base == SLIM_BASE, f"org.opencontainers.image.base.name={base}")

    helped = podman_run(engine, image)
    report.check(
        "thalweg --help (the default command)",
        helped.returncode == 0 and "cluster" in helped.stdout and "run" in helped.stdout,
        f"exit {helped.returncode}, {len(helped.stdout.splitlines())} lines",
    )
    who = podman_run(engine, "--entrypoint", "id", image)
    report.check(
        "runs as non-root",
        who.stdout.startswith("uid=10001(thalweg) gid=10001(thalweg)"),
        who.stdout.strip() or who.stderr.strip(),
    )
    probe = " ".join(COMPILERS)
    found = podman_run(
        engine,
        "--entrypoint",
        "sh",
        image,
        "-c",
        f'for c in {probe}; do command -v "$c"; done; true',
    )
    report.check(
        "no compiler",
        found.returncode == 0 and not found.stdout.strip(),
        f"none of {probe} on PATH" if not found.stdout.strip() else found.stdout.strip(),
    )
    code = "import importlib\n" + "".join(
        f"print(importlib.import_module({m!r}).__file__)\n" for m in EXTENSIONS
    )
    ext = podman_run(engine, "--entrypoint", "python", image, "-c", code)
    files = ext.stdout.split()
    report.check(
        "compiled extensions import",
        ext.returncode == 0
        and len(files) == len(EXTENSIONS)
        and all(f.endswith(".so") for f in files),
        ", ".join(Path(f).name for f in files) or ext.stderr.strip()[-300:],
    )


def check_source(engine: Engine, image: str, report: Report) -> None:
    """The package in the image is this checkout's: its Python sources, file for file."""
    here = run([sys.executable, "-c", DIGEST_CODE, str(ROOT / "thalweg_bytewax")]).split()
    there = podman_run(engine, "--entrypoint", "python", image, "-c", DIGEST_CODE, SITE_PACKAGE)
    found = there.stdout.split()
    report.check(
        "the image holds this checkout's package",
        there.returncode == 0 and found == here,
        f"{here[1]} source files, sha256 {here[0][:16]}…"
        if found == here
        else f"checkout {here}, image {found or there.stderr.strip()[-300:]}",
    )


def check_orders(engine: Engine, image: str, report: Report) -> None:
    """``thalweg run orders`` on its embedded sample, as the Dockerfile's header runs it."""
    started = time.monotonic()
    done = podman_run(engine, image, "run", "orders")
    took = report.timed("thalweg run orders", started)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    for line in lines[-9:]:
        print(f"    {line}")
    read = re.search(r"orders: ([\d,]+) records read", done.stdout)
    count = read[1] if read else "?"
    raw = f"  raw lane thalweg-data/raw: {count} records (+{count})"
    report.check(
        "thalweg run orders",
        done.returncode == 0
        and read is not None
        and raw in done.stdout
        and "table sales.orders (iceberg" in done.stdout,
        f"exit {done.returncode} in {took:.0f} s; {count} records read, raw lane "
        f"{'complete' if raw in done.stdout else 'INCOMPLETE'}"
        + ("" if done.returncode == 0 else f"; {done.stderr.strip()[-400:]}"),
    )


def free_loopback_pair(ports: Sequence[int]) -> list[str]:
    """Two loopback addresses ``127.R.S.2`` and ``.3`` with ``ports`` free on both."""
    rng = random.SystemRandom()
    for _ in range(50):
        prefix = f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}"
        hosts = [f"{prefix}.2", f"{prefix}.3"]
        try:
            for host in hosts:
                for port in ports:
                    with socket.socket() as sock:
                        sock.bind((host, port))
        except OSError:
            continue
        return hosts
    msg = f"no pair of loopback addresses with ports {list(ports)} free"
    raise RuntimeError(msg)


def check_cluster(engine: Engine, image: str, work: Path, report: Report) -> None:
    """The StatefulSet's container (deploy/kubernetes/base) as two containers forming a cluster.

    Each "pod" is a container on the host's network bound to a loopback address of its
    own, with its own recovery and lake directories, a read-only root file system, every
    capability dropped and no privilege escalation, as the manifest's securityContext
    asks; the pipeline is ``thalweg init``'s starter (an embedded sample of
    ``CLUSTER_RECORDS`` records: no broker, no credentials), mounted where the ConfigMap is.
    """
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="cluster-", dir=work))
    for path in (root, *(root / f"pod-{i}" / d for i in range(2) for d in ("lake", "recovery"))):
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, 10001, 10001)
    made = podman_run(engine, "-v", f"{root}:/out", image, "init", "/out/pipeline.toml")
    if made.returncode != 0:
        report.check("cluster", False, f"thalweg init failed: {made.stderr.strip()[-400:]}")
        return
    peer_port, http_port = int(POD_ENV["THALWEG_CLUSTER_PORT"]), int(POD_ENV["THALWEG_HTTP_PORT"])
    hosts = free_loopback_pair([peer_port, http_port])
    addresses = ";".join(f"{h}:{peer_port}" for h in hosts)
    suffix = root.name.removeprefix("cluster-").lower()
    names = [f"thalweg-local-{suffix}-{i}" for i in range(2)]
    env = {
        **POD_ENV,
        # What differs from a pod: the peers' addresses (no DNS names), the lake's path
        # (the starter writes under the working directory) and the sample's size.
        "THALWEG_CLUSTER_ADDRESSES": addresses,
        "THALWEG_DATA_DIR": "/data/lake",
        "THALWEG_SOURCE__COUNT": str(CLUSTER_RECORDS),
    }
    try:
        for i, name in enumerate(names):
            pod = root / f"pod-{i}"
            pod_env = {**env, "THALWEG_PROCESS_ID": str(i), "THALWEG_HTTP_HOST": hosts[i]}
            cmd = ["podman", *engine.global_opts, "run", "-d", "--name", name, *engine.run_opts]
            # The manifest's securityContext, on the host's network.
            cmd += ["--network", "host", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL"]
            cmd += ["--security-opt", "no-new-privileges"]
            cmd += ["-v", f"{root / 'pipeline.toml'}:{POD_ENV['THALWEG_CONFIG']}:ro"]
            cmd += ["-v", f"{pod / 'lake'}:/data/lake", "-v", f"{pod / 'recovery'}:/data/recovery"]
            cmd += [f"--env={k}={v}" for k, v in pod_env.items()]
            run([*cmd, image, *POD_ARGS])
        codes = [int(run(["podman", "wait", name], timeout=600).strip()) for name in names]
        took = report.timed("two-container cluster", started)
        logs = []
        for name in names:
            shown = subprocess.run(
                ["podman", "logs", name], capture_output=True, text=True, check=False
            )
            logs.append(shown.stdout + shown.stderr)
        for i, log in enumerate(logs):
            for line in [ln for ln in log.splitlines() if ln.strip()][-4:]:
                print(f"    pod-{i}: {line}")
        count = (
            "from thalweg_bytewax.lanes import read_lane\n"
            "from thalweg_bytewax.cluster.recovery_init import partition_files\n"
            "from pathlib import Path\n"
            "rows = [read_lane(Path(f'/pods/pod-{i}/lake/raw')).num_rows for i in (0, 1)]\n"
            "parts = [len(partition_files(Path(f'/pods/pod-{i}/recovery'))) for i in (0, 1)]\n"
            "print(rows, parts)\n"
        )
        counted = podman_run(
            engine, "-v", f"{root}:/pods:ro", "--entrypoint", "python", image, "-c", count
        )
        found = counted.stdout.strip()
        rows = re.match(r"\[(\d+), (\d+)\] \[(\d+), (\d+)\]", found)
        ok = (
            codes == [0, 0]
            and rows is not None
            and int(rows[1]) + int(rows[2]) == CLUSTER_RECORDS
            and int(rows[1]) > 0
            and int(rows[2]) > 0
            and (rows[3], rows[4]) == ("8", "0")
        )
        detail = f"exit codes {codes} in {took:.0f} s on {addresses}; raw rows per pod " + (
            f"{rows[1]} + {rows[2]} of {CLUSTER_RECORDS}; recovery partitions {rows[3]} (pod-0), "
            f"{rows[4]} (pod-1)"
            if rows
            else f"unreadable: {found or counted.stderr[-400:]}"
        )
        if report.check("two-container cluster (thalweg cluster pipeline)", ok, detail):
            shutil.rmtree(root)
        else:
            print(f"    the pods' directories are kept: {root}")
    finally:
        subprocess.run(["podman", "rm", "-f", *names], capture_output=True, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Make the bases, build the image, run the checks; the exit code says how it went."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    parser.add_argument("--image", default=f"localhost/thalweg:{version[1]}-local")
    parser.add_argument("--work-dir", type=Path, default=Path("/var/tmp/thalweg-image"))
    parser.add_argument("--mirror", default="http://deb.debian.org/debian")
    parser.add_argument(
        "--security-mirror", help="Debian's security updates (default: beside --mirror)"
    )
    parser.add_argument(
        "--ca-bundle",
        type=Path,
        default=default_ca_bundle(),
        help="the CA bundle the build's pip trusts (default: this host's)",
    )
    parser.add_argument("--rebuild-bases", action="store_true", help="make both bases again")
    parser.add_argument("--no-cluster", action="store_true", help="skip the cluster check")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="reuse podman's layer cache (faster, but Buildah reuses the runtime's install "
        "step even when the builder's wheels changed: the source check then fails)",
    )
    args = parser.parse_args(argv)
    report = Report()
    started = time.monotonic()
    try:
        need_bases = args.rebuild_bases or not (shutil.which("podman") and image_exists(SLIM_BASE))
        require_tools(need_bases)
        args.work_dir.mkdir(parents=True, exist_ok=True)
        if args.rebuild_bases or not image_exists(SLIM_BASE):
            security = args.security_mirror or (
                args.mirror.rstrip("/").removesuffix("/debian") + "/debian-security"
            )
            make_slim_base(args.work_dir, args.mirror, security, report)
        engine = pick_engine()
        pip_conf, ca = pip_settings(args.ca_bundle)
        if args.rebuild_bases or not build_base_is_current(settings_digest(pip_conf, ca)):
            make_build_base(engine, args.work_dir, pip_conf, ca, report)
        build_image(engine, args.image, args.work_dir, report, cache=args.cache)
        check_image(engine, args.image, report)
        check_source(engine, args.image, report)
        check_orders(engine, args.image, report)
        if not args.no_cluster:
            check_cluster(engine, args.image, args.work_dir, report)
    except Fatal as stop:
        print(f"build_local: {stop}", file=sys.stderr)
        return stop.code
    except (RuntimeError, subprocess.TimeoutExpired) as failed:
        print(f"build_local: {failed}", file=sys.stderr)
        return 1
    report.timed("total", started)
    print("\nsummary:")
    for name, ok, detail in report.results:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
    for name, took in report.timings:
        print(f"  time  {name}: {took:.0f} s")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
