"""The container image: the Dockerfile lints clean, holds what it promises, and its stages work.

No container engine runs in CI, so the stages' ``RUN`` commands are executed as written
on this machine, one after the other, with the image's paths mapped to temporary
directories: the builder's on a copy of the build context (the checkout filtered by
``.dockerignore``), the runtime's in a fresh virtualenv outside the checkout. Two
differences, both for speed: pip installs no dependency and reads the index only for the
package's build backend (``PIP_NO_DEPS``, ``PIP_NO_INDEX``; the new virtualenv sees this environment's
site-packages through a ``.pth``, as tests/project/test_packaging.py does, and CI's install stage
installs the wheel with its dependencies for real), and the system user and group are not created.
Then the image's entry point runs: ``thalweg --help`` and the flagship flow.
"""

from __future__ import annotations

import configparser
import fnmatch
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from tests.project.test_kubernetes_manifests import container, plain_env
from tests.project.test_packaging import _run

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def stage(name: str) -> list[tuple[str, str]]:
    """The instructions of the stage named ``name`` (after its FROM)."""
    out: list[tuple[str, str]] | None = None
    for keyword, rest in instructions():
        if keyword == "FROM":
            if out is not None:
                return out
            if rest.endswith(f" AS {name}"):
                out = []
        elif out is not None:
            out.append((keyword, rest))
    assert out is not None, f"no stage {name}"
    return out


def arg_defaults() -> dict[str, str]:
    return {
        k: v
        for keyword, rest in instructions()
        if keyword == "ARG" and "=" in rest
        for k, v in [rest.split("=", 1)]
    }


@pytest.mark.slow
def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).with_name("hadolint")
    done = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_runtime_is_slim_unprivileged_labelled_and_runs_thalweg() -> None:
    args = arg_defaults()
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    assert f"Programming Language :: Python :: {args['PYTHON_VERSION']}" in classifiers
    froms = [rest for keyword, rest in instructions() if keyword == "FROM"]
    assert froms == ["${BUILDER_BASE} AS builder", "${RUNTIME_BASE} AS runtime"]
    # By default the official images: the full one builds, the slim one runs.
    assert args["BUILDER_BASE"] == "python:${PYTHON_VERSION}-${DEBIAN_RELEASE}"
    assert args["RUNTIME_BASE"] == "python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE}"
    runtime = stage("runtime")
    run = " ".join(rest for keyword, rest in runtime if keyword == "RUN")
    assert not re.search(r"\b(gcc|build-essential|apt-get|cc)\b", run), run
    assert "--no-index" in run, "the runtime must install the builder's wheels only"
    users = [rest for keyword, rest in runtime if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert ("ENTRYPOINT", '["thalweg"]') in runtime
    labels = " ".join(rest for keyword, rest in runtime if keyword == "LABEL")
    for key in ("title", "description", "version", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    # A global ARG is empty inside a stage that does not declare it again.
    stage_args = {rest.split("=")[0] for keyword, rest in runtime if keyword == "ARG"}
    for used in re.findall(r"\$\{(\w+)\}", labels):
        assert used in stage_args, f"the label's ${{{used}}} is not declared in the runtime stage"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert args["VERSION"] == version, "the image's version label must follow pyproject.toml"


def dockerignored(rel: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        if pattern.startswith("**/"):
            if PurePosixPath(rel).match(pattern[3:]):
                return True
        elif fnmatch.fnmatch(rel, pattern) or rel.startswith(pattern.rstrip("/") + "/"):
            return True
    return False


def build_context(dest: Path) -> Path:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(ROOT)
        return {n for n in names if dockerignored((rel / n).as_posix(), patterns)}

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)
    return dest


def shell_commands(stage_name: str, mapping: dict[str, str]) -> list[str]:
    """A stage's RUN commands split at ``&&``, mount flags dropped, paths and ARGs mapped."""
    out = []
    for keyword, rest in stage(stage_name):
        if keyword != "RUN":
            continue
        rest = re.sub(r"--mount=\S+\s*", "", rest)
        for command in rest.split(" && "):
            for old, new in mapping.items():
                command = command.replace(old, new)
            out.append(command.strip())
    return out


@pytest.mark.slow
def test_the_stages_commands_build_and_install_a_working_thalweg(tmp_path: Path) -> None:
    context = build_context(tmp_path / "src")
    assert not list(context.rglob("*.so")), "built extensions must not enter the context"
    assert not (context / ".venv").exists() and not (context / ".git").exists()
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    mapping = {
        "${THALWEG_EXTRAS}": arg_defaults()["THALWEG_EXTRAS"],
        "/wheels": str(wheels),
        "/opt/venv": str(venv),
        "/src": str(context),
    }
    env_build = {"PIP_NO_DEPS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env = {**env_build, "PIP_NO_INDEX": "1"}
    python = shlex.quote(sys.executable)
    for command in shell_commands("builder", mapping):
        command = re.sub(r"^python ", f"{python} ", command)
        # The package's own build fetches its build backend (setuptools) from the index.
        building = "--no-deps" in command and str(context) in command
        _run(["bash", "-c", command], cwd=tmp_path, env=env_build if building else env)
    (wheel,) = wheels.glob("thalweg_bytewax-*.whl")
    assert "-py3-none-any" not in wheel.name, "the builder's wheel holds no compiled extension"

    ours = [p for p in sys.path if p.endswith("site-packages")]
    for command in shell_commands("runtime", mapping):
        if command.startswith(("groupadd ", "useradd ")):
            continue  # no system user or group on the test machine
        command = re.sub(r"^python ", f"{python} ", command)
        _run(["bash", "-c", command], cwd=tmp_path, env=env)
        if "-m pip install" in command:  # after it: ours would count as installed
            site = _run([str(venv / "bin/python"), "-c",
                         "import sysconfig; print(sysconfig.get_path('purelib'))"])  # fmt: skip
            (Path(site.stdout.strip()) / "deps.pth").write_text("\n".join(ours) + "\n")

    work = tmp_path / "data"
    work.mkdir()
    entry = venv / "bin" / "thalweg"
    helped = _run([str(entry), "--help"], cwd=work)
    assert "cluster" in helped.stdout and "run" in helped.stdout
    ran = _run([str(entry), "run", "orders"], cwd=work, env={"THALWEG_SAMPLE_ORDERS": "300"})
    assert "  raw lane thalweg-data/raw: 300 records (+300)" in ran.stdout, ran.stdout
    where = _run([str(venv / "bin/python"), "-c", "import thalweg_bytewax; print(thalweg_bytewax.__file__)"],
                 cwd=work)  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout


def build_local():  # deploy/image/build_local.py: a script, not a module of the package
    spec = importlib.util.spec_from_file_location(
        "build_local", ROOT / "deploy" / "image" / "build_local.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_local_build_without_an_engine_says_so_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = build_local()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no podman on it
    work = tmp_path / "work"
    assert script.main(["--work-dir", str(work)]) == 2
    err = capsys.readouterr().err
    assert "no container engine: podman is not installed" in err, err
    assert "no image was built" in err and "apt-get install podman" in err, err
    assert not work.exists()


def test_the_image_imports_every_extension_setup_py_builds() -> None:
    # The runtime stage fails its build when a compiled extension is missing, and the
    # local build checks each one in the image: both name every extension setup.py
    # builds, the Avro walk among them, so none falls back to its pure-Python path there.
    script = build_local()
    built = script.setup_extensions()
    assert "thalweg_bytewax.codecs._avro_native" in built
    assert script.EXTENSIONS == built
    (imported,) = (
        set(re.findall(r"thalweg_bytewax[\w.]*", rest))
        for keyword, rest in stage("runtime")
        if keyword == "RUN" and 'python -c "import thalweg_bytewax' in rest
    )
    assert imported == set(built)


def test_the_local_builds_cluster_check_runs_the_statefulsets_container() -> None:
    script = build_local()
    assert container()["args"] == script.POD_ARGS
    assert plain_env() == script.POD_ENV


def test_the_local_builder_base_gets_the_hosts_index_and_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build's pip reaches the index as this host's does: its CA bundle (an
    # intercepting proxy's own CA) and its index settings, in the builder base only.
    script = build_local()
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example.internal/simple")
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n")
    conf, bundle = script.pip_settings(ca)
    parsed = configparser.ConfigParser()
    parsed.read_string(conf)
    assert dict(parsed["global"]) == {
        "cert": script.BUILD_CA,
        "index-url": "https://pypi.example.internal/simple",
    }
    assert bundle == ca.read_bytes()
    # Another bundle or index makes the base again (its label records both).
    ca.write_text("-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n")
    assert script.settings_digest(*script.pip_settings(ca)) != script.settings_digest(conf, bundle)
    monkeypatch.delenv("PIP_INDEX_URL")
    assert script.settings_digest(*script.pip_settings(ca)) != script.settings_digest(conf, bundle)


@pytest.mark.slow
def test_the_local_build_names_each_way_podman_failed_to_run_a_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A podman whose every container fails to start, as on a machine without the right
    # to set resource limits: the script stops before building, exit 3, with each error.
    script = build_local()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    podman = bin_dir / "podman"
    podman.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2" = "image exists" ]; then exit 0; fi\n'
        "echo 'Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted' >&2\n"
        "exit 126\n"
    )
    podman.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert script.main(["--work-dir", str(tmp_path / "work")]) == 3
    err = capsys.readouterr().err
    assert "podman cannot run a container here" in err, err
    assert err.count("setrlimit `RLIMIT_NOFILE`: Operation not permitted") == 2, err
    assert "--ulimit nofile=" in err, err
