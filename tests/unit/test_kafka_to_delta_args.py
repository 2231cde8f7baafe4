"""jobs/kafka_to_delta.py's command line: ``--trigger`` as documented (``30s``) reaches Spark in
the interval form Spark parses."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

JOB = Path(__file__).resolve().parents[2] / "jobs" / "kafka_to_delta.py"


def _job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafka_to_delta_args", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("given", "spark"),
    [
        ("30s", "30 seconds"),
        ("500ms", "500 milliseconds"),
        ("5m", "5 minutes"),
        ("1h", "1 hours"),
        ("30 seconds", "30 seconds"),
        ("availableNow", "availableNow"),
    ],
)
def test_trigger_takes_the_documented_forms(given: str, spark: str) -> None:
    assert _job().parse_args(["--trigger", given]).trigger == spark


def test_trigger_refuses_what_spark_cannot_parse_naming_the_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _job().parse_args(["--trigger", "soon"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'soon'" in err and "30s" in err and "availableNow" in err, err
