"""``spark_kafka_group.testing`` ships in the wheel (the benchmarks use it), so it must run on a
plain installation: its modules import the standard library, the package and its runtime
dependencies only, never pytest, Hypothesis or ``tests``."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import spark_kafka_group.testing

TESTING = Path(spark_kafka_group.testing.__file__).resolve().parent
PACKAGE = TESTING.parent


def runtime_distributions() -> set[str]:
    """The distributions ``pip install spark-kafka-group`` installs (no extra)."""
    found = set()
    for requirement in requires("spark-kafka-group") or []:
        if "extra ==" in requirement:
            continue
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert name, requirement
        found.add(_normalized(name.group()))
    return found


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def top_level_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level module)`` of every absolute import in ``path``, at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def test_the_testing_harness_needs_only_runtime_dependencies() -> None:
    runtime = runtime_distributions()
    assert {"pyspark", "confluent-kafka", "deltalake"} <= runtime, runtime
    providers = packages_distributions()
    files = sorted(TESTING.glob("*.py"))
    assert len(files) > 3, f"no testing modules under {TESTING}"
    offenders = []
    for path in files:
        for line, module in top_level_imports(path):
            if module in sys.stdlib_module_names or module == "spark_kafka_group":
                continue
            distributions = {_normalized(d) for d in providers.get(module, [])}
            if not distributions & runtime:
                offenders.append(f"{path.name}:{line}: {module} (from {distributions or '?'})")
    assert not offenders, (
        "spark_kafka_group.testing ships in the wheel; it may import only runtime dependencies "
        f"({sorted(runtime)}):\n" + "\n".join(offenders)
    )


def test_nothing_in_the_package_imports_test_only_code() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, module in top_level_imports(path)
        if module in {"pytest", "hypothesis", "tests"}
    ]
    assert not offenders, "the wheel must not need test-only code:\n" + "\n".join(offenders)
