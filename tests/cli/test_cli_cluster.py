"""`thalweg cluster`: its settings are read by the same rules as the cluster's topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from thalweg_bytewax.cli import EXIT_USAGE, main


@pytest.fixture
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster of this one process, so the topology and the peer wait pass at once."""
    monkeypatch.setenv("THALWEG_CLUSTER_ADDRESSES", "127.0.0.1:2101")
    monkeypatch.setenv("THALWEG_PROCESS_ID", "0")


@pytest.mark.usefixtures("one_process")
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("soon", "THALWEG_PEER_TIMEOUT_S='soon' is not a number of seconds; set it to one"),
        ("-1", "THALWEG_PEER_TIMEOUT_S=-1 is below 0; set it to 0 or more seconds"),
    ],
)
def test_a_bad_duration_variable_is_refused_naming_it(
    value: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THALWEG_PEER_TIMEOUT_S", value)
    assert main(["cluster", "tests.cluster.tiny_flow:flow"]) == EXIT_USAGE
    assert says in capsys.readouterr().err


@pytest.mark.usefixtures("one_process")
@pytest.mark.parametrize("value", ["2.5", "two", "-1"])
def test_a_partition_count_that_is_not_a_whole_number_is_refused_before_creating_any(
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("THALWEG_RECOVERY_PARTITIONS", value)
    code = main(["cluster", "-r", str(tmp_path / "recovery"), "tests.cluster.tiny_flow:flow"])
    assert code == EXIT_USAGE
    assert f"THALWEG_RECOVERY_PARTITIONS={value}" in capsys.readouterr().err.replace("'", "")
    assert not (tmp_path / "recovery").exists()
