"""The benchmarks run against the installed package and its testing harness
(``spark_kafka_group.testing``), never against test code: a benchmark that imports ``tests``
breaks when the tests change and cannot run from a wheel."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``source``, at any depth (function-level too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def imports_tests(module: str) -> bool:
    return module == "tests" or module.startswith("tests.")


def test_the_scan_sees_every_kind_of_import() -> None:
    source = (
        "import tests.processes\n"
        "from tests.streaming import SteadyProducer\n"
        "def f():\n"
        "    from tests import object_stores\n"
        "import testsuite, spark_kafka_group.testing\n"
    )
    flagged = [(line, m) for line, m in imported_modules(source) if imports_tests(m)]
    assert flagged == [(1, "tests.processes"), (2, "tests.streaming"), (4, "tests")]


def test_no_benchmark_imports_the_tests() -> None:
    files = sorted(BENCHMARKS.glob("*.py"))
    assert len(files) > 5, f"no benchmarks found under {BENCHMARKS}"
    offenders = [
        f"{path.name}:{line}: imports {module}"
        for path in files
        for line, module in imported_modules(path.read_text())
        if imports_tests(module)
    ]
    assert not offenders, (
        "benchmarks must import the testing harness (spark_kafka_group.testing), not tests/:\n"
        + "\n".join(offenders)
    )
