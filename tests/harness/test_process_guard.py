"""`slow` means "starts a process": a test not marked slow that starts one fails.

tests/fixtures/processes.py guards every way Python starts a process while a test sets up
and runs; these run a small suite under it (in this process, with ``pytester``).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = 'pytest_plugins = ["tests.fixtures.processes"]\n'
INI = "[pytest]\nmarkers =\n    slow: starts a process\n"


def _suite(pytester: pytest.Pytester, tests: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=tests)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rf")


def test_each_way_of_starting_a_process_fails_a_test_not_marked_slow(
    pytester: pytest.Pytester,
) -> None:
    result = _suite(
        pytester,
        """
import multiprocessing, os, subprocess, sys
import pytest

def test_subprocess():
    subprocess.run([sys.executable, "-c", "pass"])

def test_caught_by_the_code_under_test():
    try:
        subprocess.run(["true"])
    except Exception:
        pass

@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing(method):
    p = multiprocessing.get_context(method).Process(target=print)
    p.start()
    p.join()

def test_os_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)

def test_os_system():
    os.system("true")

def test_posix_spawn():
    os.posix_spawn("/bin/true", ["true"], {})

@pytest.fixture
def server():
    return subprocess.Popen(["sleep", "5"])

def test_a_fixture_of_the_test(server):
    pass

def test_no_process():
    assert sum(range(4)) == 6
""",
    )
    result.assert_outcomes(passed=1, failed=8, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_subprocess started a process (*fork_exec: * -c pass) but is not marked slow:"
            " add @pytest.mark.slow*",
        ]
    )
    result.stdout.fnmatch_lines(["*test_caught_by_the_code_under_test started 1 process(es)*"])
    result.stdout.fnmatch_lines(["*test_a_fixture_of_the_test started a process (*sleep 5)*"])


@pytest.mark.slow
def test_a_slow_test_and_a_session_fixture_may_start_processes(
    pytester: pytest.Pytester,
) -> None:
    result = _suite(
        pytester,
        """
import subprocess
import pytest

@pytest.fixture(scope="session")
def server():
    return subprocess.run(["true"], check=True)

@pytest.mark.slow
def test_marked():
    subprocess.run(["true"], check=True)

def test_using_a_session_fixture(server):
    assert server.returncode == 0
""",
    )
    result.assert_outcomes(passed=2)


def test_users_of_apache_kafka_are_marked_slow(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(
        test_suite="""
import pytest

@pytest.fixture
def apache_kafka_factory():
    return None

def test_cluster(apache_kafka_factory):
    pass

def test_plain():
    pass
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "not slow")
    result.assert_outcomes(passed=1, deselected=1)
