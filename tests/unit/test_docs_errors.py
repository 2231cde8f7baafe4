"""docs/troubleshooting.md has a section, with cause and fix, for every error class a user can
see: a new error class without one fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import spark_kafka_group
from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group.assignors import AssignorLookupError
from spark_kafka_group.group.errors import GroupProtocolBug

ROOT = Path(__file__).resolve().parents[2]

#: Raised and caught inside the package; never reaches a user.
INTERNAL = {"AppendConflict"}  # a lost compare-and-swap race, retried by the member's log client


def user_facing_errors() -> set[str]:
    names = {AssignorLookupError.__name__, GroupProtocolBug.__name__}
    for info in pkgutil.walk_packages(spark_kafka_group.__path__, "spark_kafka_group."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, KafkaGroupError) and cls.__module__.startswith("spark_kafka_group"):
                names.add(name)
    return names - INTERNAL


def test_every_user_facing_error_has_a_troubleshooting_section() -> None:
    page = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    errors = user_facing_errors()
    assert {"OptionError", "GroupStoreError", "UnsafeGroupStoreError"} <= errors
    missing = []
    for name in sorted(errors):
        heading = f"## `{name}` {{#{name.lower()}}}"
        if heading not in page:
            missing.append(f"{name} (no heading {heading!r})")
            continue
        section = page.split(heading, 1)[1].split("\n## ", 1)[0]
        missing += [
            f"{name} (no {part})" for part in ("**Cause.**", "**Fix.**") if part not in section
        ]
    assert not missing, f"docs/troubleshooting.md lacks a section with cause and fix for {missing}"
