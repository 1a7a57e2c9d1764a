"""The README runs as written, as a new user would type it.

The commands and code are taken from the README itself, so a change there is tested
here. Only the install steps are left out (the test runs in the installed environment:
the temp working directory's ``.venv`` links to the interpreter's venv), and so is the
command that runs the test suite itself. Everything else runs verbatim in a fresh
directory, in its own process group, which is killed at the end whatever happens: the
Quickstart (the embedded flow and its tables, the lane stats, the DuckDB query, the local
PostgreSQL and the flow into it, and broker, produce and flow against Kafka), "Use it in
your own flow" (its code saved as the file it names, run against the broker its commands
start), "From a TOML file" (the edited file written where ``thalweg init`` wrote the
starter) and the commands of "Hacking" (the test runs collected, not run). Each
``text`` block of a section is output its commands must print (``…`` stands for what
varies: times, versions). Every link of the README leads to a file, and an anchor in it.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = re.compile(r"-m venv |pip install ")


def section(title: str) -> str:
    """The text of the README's section ``## title`` (up to the next section)."""
    text = (ROOT / "README.md").read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(title: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of a section, in order."""
    return re.findall(rf"```{language}\n(.*?)```", section(title), flags=re.DOTALL)


def quickstart_commands(title: str = "Quickstart") -> list[str]:
    """The shell commands of a README section (the Quickstart), install steps removed."""
    commands: list[str] = []
    for block in blocks(title, "bash"):
        for command in block.replace("\\\n", " ").splitlines():
            if not command.strip() or "-m pytest" in command:
                continue
            steps = [s for s in command.split(" && ") if not INSTALL.search(s)]
            commands.append(" && ".join(steps))
    return commands


def run_verbatim(cwd: Path, commands: list[str], timeout: float = 300) -> str:
    """Run ``commands`` as one ``set -e`` script in ``cwd``; its stdout, or fail with both."""
    if not (cwd / ".venv").exists():
        (cwd / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    proc = subprocess.Popen(
        ["bash", "-c", "set -e\n" + "\n".join(commands) + "\n"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, (commands, out[-3000:], err[-3000:])
    return out


def assert_prints(out: str, title: str) -> None:
    """Every line of the section's ``text`` blocks is in ``out`` (``…``: anything)."""
    expected = [line for block in blocks(title, "text") for line in block.splitlines()]
    assert expected, f"no output shown in the README's {title!r}"
    for line in expected:
        pattern = ".*?".join(re.escape(part) for part in line.split("…"))
        assert re.search(rf"^{pattern}$", out, flags=re.MULTILINE), (line, out[-3000:])


def test_the_quickstart_commands_are_all_found() -> None:
    commands = quickstart_commands()
    assert any("thalweg dev broker &" in c for c in commands)
    assert any("thalweg dev postgres &" in c for c in commands)
    assert commands[0].startswith(".venv/bin/thalweg run orders")
    assert not any("PORT" in c for c in commands), "a placeholder the user must replace"


def test_the_quickstart_runs_verbatim(open_dir: Path) -> None:
    tmp_path = open_dir  # every parent traversable: `thalweg dev postgres` run as root widens none
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    script = "set -e\n" + "\n".join(quickstart_commands()) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("THALWEG_")}
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, (out[-3000:], err[-3000:])
    # The embedded run, its tables, its lane stats and the DuckDB query over its DLQ.
    ice = "(iceberg thalweg-data/warehouse)"
    assert "  raw lane thalweg-data/raw: 20,000 records (+20,000)" in out
    assert "  rejected: 40 (decode 20, dq 20)" in out
    assert f"  table sales.orders {ice}: 19,960 rows (+19,960)" in out
    # The sample is deterministic: docs/flows/orders.md shows these very counts.
    assert f"  table sales.order_lines {ice}: 50,106 rows (+50,106)" in out
    assert "50,106 order lines" in (ROOT / "docs" / "flows" / "orders.md").read_text()
    assert f"  table sales.revenue_per_status_minute {ice}: " in out
    assert "total: 20,000 records" in out
    assert "reason" in out and "decode" in out and "dq" in out
    # `thalweg query`: every order of the table joined to its record in the raw lane.
    assert re.search(r"│ 19960\s+│ 19960\s+│", out), out[-3000:]
    # The local PostgreSQL: the same run fills its tables, the Iceberg ones hold already.
    assert "DSN postgresql://" in out
    assert f"  table sales.orders {ice}: 19,960 rows (+0)" in out
    assert "  table public.orders (postgres): 19,960 rows (+19,960)" in out
    assert "  table public.revenue_per_status_minute (postgres): " in out
    assert not (tmp_path / ".thalweg" / "postgres.dsn").exists(), "the stopped server's DSN"
    assert (tmp_path / ".thalweg" / "postgres").is_dir(), "the server's data is kept"
    # Broker, produce and the same flow on Kafka, into its own lake.
    assert "produced 10,000 sample orders" in out
    assert "  raw lane thalweg-kafka/raw: 10,000 records (+10,000)" in out
    assert not (tmp_path / ".thalweg" / "broker").exists(), "the stopped broker left its address"


@pytest.mark.slow
def test_your_own_flow_runs_verbatim_and_ends_by_itself(tmp_path: Path) -> None:
    [code] = blocks("Use it in your own flow", "python")
    commands = quickstart_commands("Use it in your own flow")
    assert any(c.startswith(".venv/bin/thalweg dev broker --port 9092 &") for c in commands)
    assert "tail=False" in code and "twg.validate(" in code and "IcebergSink(" in code
    with socket.socket() as probe:  # the fixed port the README names must be free
        assert probe.connect_ex(("127.0.0.1", 9092)) != 0, "port 9092 is taken on this machine"
    (tmp_path / "my_flow.py").write_text(code)
    out = run_verbatim(tmp_path, commands)
    assert_prints(out, "Use it in your own flow")
    # Every produced order is in the table or in the DLQ, and the contract rejected some.
    landed = re.search(r"^sales\.orders: (\d+) rows, dlq: (\d+) rows$", out, flags=re.MULTILINE)
    assert landed, out[-3000:]
    orders, dlq = int(landed[1]), int(landed[2])
    assert "produced 1,000 sample orders" in out
    assert orders + dlq == 1000 and dlq > 0
    assert not (tmp_path / ".thalweg" / "broker").exists(), "the broker was not stopped"


@pytest.mark.slow
def test_the_toml_file_is_written_edited_checked_and_run(tmp_path: Path) -> None:
    commands = quickstart_commands("From a TOML file")
    assert commands[0] == ".venv/bin/thalweg init pipeline.toml"
    run_verbatim(tmp_path, commands[:1])
    starter = (tmp_path / "pipeline.toml").read_text()
    assert "[source]" in starter and '# kind = "sample"' in starter
    [edited] = blocks("From a TOML file", "toml")  # the starter, edited down
    (tmp_path / "pipeline.toml").write_text(edited)
    out = run_verbatim(tmp_path, commands[1:])
    assert "`pipeline.toml`: valid `pipeline` settings" in out
    assert_prints(out, "From a TOML file")


@pytest.mark.slow
def test_the_hacking_commands_are_the_ones_ci_runs_and_collect_tests() -> None:
    commands = quickstart_commands("Hacking")
    ci = (ROOT / ".ci" / "run").read_text()
    [install] = [b for b in blocks("Hacking", "bash") if INSTALL.search(b)]
    assert install.strip() in (ROOT / "README.md").read_text().split("## Quickstart")[1]
    assert '.venv/bin/python -m pip install --quiet -e ".[test]"' in ci
    tests = [c for c in blocks("Hacking", "bash") for c in c.splitlines() if "-m pytest" in c]
    assert len(tests) == 2, tests
    for command in tests:  # the markers and paths exist: each collects tests, runs none
        done = subprocess.run(
            f"{command.replace('.venv/bin/python', sys.executable)} --collect-only",
            shell=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        assert re.search(r"^[1-9]\d*(/\d+)? tests? collected", done.stdout, re.M), done.stdout
    others = [c for c in commands if c.strip()]
    assert ".venv/bin/python -m ruff check ." in others and ".venv/bin/python -m ruff check ." in ci
    assert "NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict" in others
    assert "NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict" in ci


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading (as mkdocs.yml's toc slugify makes them)."""
    text = re.sub(r"[`*\[\]()]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_link_of_the_readme_leads_to_a_file_and_anchor() -> None:
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 30, local
    broken = []
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / (path or "README.md")
        if not target.exists():
            broken.append(link)
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(link)
    assert broken == []


def test_the_readme_counts_the_c_extensions_setup_py_builds() -> None:
    setup = ast.parse((ROOT / "setup.py").read_text())
    built = [
        node
        for node in ast.walk(setup)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Extension"
    ]
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    text = (ROOT / "README.md").read_text().lower()
    assert set(re.findall(r"(\w+) small c extensions", text)) == {words[len(built)]}
