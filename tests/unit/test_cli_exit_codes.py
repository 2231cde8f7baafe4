"""The exit codes docs/troubleshooting.md documents are the ones ``kafka-group`` returns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_kafka_group.ops.cli.arguments import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from spark_kafka_group.ops.cli.main import main

TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def documented_exit_codes() -> dict[int, str]:
    """``{code: meaning}`` from the page's exit-code table."""
    text = TROUBLESHOOTING.read_text(encoding="utf-8")
    table = text.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0]
    return {
        int(match.group(1)): match.group(2)
        for match in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.MULTILINE)
    }


def code_for(meaning: str) -> int:
    (code,) = [c for c, text in documented_exit_codes().items() if meaning in text]
    return code


def test_the_documented_exit_codes_are_the_clis() -> None:
    assert set(documented_exit_codes()) == {EXIT_OK, EXIT_FAILED, EXIT_USAGE, 130}


def test_an_option_error_and_a_failed_operation_exit_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    # An OptionError: deleting without --yes when standard input is not a terminal.
    (tmp_path / "stdin").write_text("")
    with open(tmp_path / "stdin", encoding="utf-8") as not_a_terminal:
        monkeypatch.setattr("sys.stdin", not_a_terminal)
        deleted = main(["delete", "--store", str(tmp_path), "--group", "g"])
    assert deleted == code_for("or an `OptionError`")
    assert "--yes" in capsys.readouterr().err
    # A failed operation: no group log where the command looks.
    assert main(["describe", "--store", str(tmp_path), "--group", "g"]) == code_for(
        "the operation failed"
    )
    assert "no group log" in capsys.readouterr().err.lower()
    # A wrong argument: argparse's usage error.
    with pytest.raises(SystemExit) as raised:
        main(["describe", "--no-such-flag"])
    assert raised.value.code == code_for("wrong usage")


def test_a_command_without_a_store_is_refused_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No store is implied, as for the source: a command never reads a default directory
    that no query wrote."""
    monkeypatch.delenv("SPARK_KAFKA_GROUP_STORE", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["describe", "--group", "g"])
    assert exit_info.value.code == EXIT_USAGE
    assert "--store is required (or $SPARK_KAFKA_GROUP_STORE)" in capsys.readouterr().err
