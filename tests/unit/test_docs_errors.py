"""The error reference (docs/troubleshooting.md) against the code: every error class a user can
see derives from ``KafkaGroupError``, is importable from ``spark_kafka_group.errors``, has a
row in the "By error" table and a section with cause and fix; every row names such a class.
A new error class anywhere in the package without all of these fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import spark_kafka_group
import spark_kafka_group.errors as errors_module
from spark_kafka_group.errors import KafkaGroupError

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"

#: Raised and caught inside the package; never reaches a user.
INTERNAL = {"AppendConflict"}  # a lost compare-and-swap race, retried by the member's log client
#: Modules whose exceptions are not the source's: the test harness's own (servers that did not
#: start), for the suites that use spark_kafka_group.testing.
HARNESS = "spark_kafka_group.testing"


def package_exception_classes() -> dict[str, type[BaseException]]:
    """Every public exception class defined in the package (outside the test harness)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(spark_kafka_group.__path__, "spark_kafka_group."):
        if info.name.startswith(HARNESS):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, BaseException)
                and cls.__module__.startswith("spark_kafka_group")
                and not cls.__module__.startswith(HARNESS)
                and not name.startswith("_")
            ):
                found[cls.__name__] = cls
    return found


def user_facing_errors() -> set[str]:
    return set(package_exception_classes()) - INTERNAL


def table_rows() -> list[tuple[str, str]]:
    """(class name, anchor) of each row of the "By error" table."""
    page = PAGE.read_text(encoding="utf-8")
    table = page.split("## By error", 1)[1].split("\n## ", 1)[0]
    rows = re.finditer(r"^\| \[`(\w+)`\]\(#(\w+)\) \|", table, flags=re.MULTILINE)
    return [(row.group(1), row.group(2)) for row in rows]


def test_every_exception_class_derives_from_kafka_group_error() -> None:
    stray = sorted(
        f"{cls.__module__}.{name}"
        for name, cls in package_exception_classes().items()
        if not issubclass(cls, KafkaGroupError)
    )
    assert not stray, f"error classes not deriving from KafkaGroupError: {stray}"


def test_every_user_facing_error_is_importable_from_the_errors_module() -> None:
    missing = sorted(
        name
        for name, cls in package_exception_classes().items()
        if name not in INTERNAL and getattr(errors_module, name, None) is not cls
    )
    assert not missing, f"not importable from spark_kafka_group.errors: {missing}"


def test_the_reference_table_has_one_row_per_error_and_nothing_else() -> None:
    rows = [name for name, _anchor in table_rows()]
    errors = user_facing_errors()
    assert {"OptionError", "GroupStoreError", "UnsafeGroupStoreError"} <= errors
    assert len(rows) == len(set(rows)), f"rows named twice: {sorted(rows)}"
    assert sorted(errors - set(rows)) == [], "errors without a row in docs/troubleshooting.md"
    assert sorted(set(rows) - errors) == [], "rows for classes the package does not have"
    for name, anchor in table_rows():
        assert anchor == name.lower(), f"row {name} links to #{anchor}"


def test_every_user_facing_error_has_a_troubleshooting_section() -> None:
    page = PAGE.read_text(encoding="utf-8")
    missing = []
    for name in sorted(user_facing_errors()):
        heading = f"## `{name}`\n"  # its anchor: #name-in-lower-case, on GitHub and the site
        if heading not in page:
            missing.append(f"{name} (no heading {heading!r})")
            continue
        section = page.split(heading, 1)[1].split("\n## ", 1)[0]
        missing += [
            f"{name} (no {part})" for part in ("**Cause.**", "**Fix.**") if part not in section
        ]
    assert not missing, f"docs/troubleshooting.md lacks a section with cause and fix for {missing}"
