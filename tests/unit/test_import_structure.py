"""The package's import structure: no cycle between its modules, hidden or not, and the pure
parts load neither delta-rs nor pyspark.

A function-level import can hide a cycle (the module imports fine only because the other side
is imported later); the graph here counts every runtime import, at any depth, so such a cycle
shows up. Imports under ``if TYPE_CHECKING:`` are for the type checker only and are left out.
An acyclic graph also means every module imports first, whatever was imported before it.
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import spark_kafka_group

PACKAGE_DIR = Path(spark_kafka_group.__file__).parent
PACKAGE = "spark_kafka_group"


def package_modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def runtime_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs when the code does, at any depth; not those under
    ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for other in child.orelse:
                yield from runtime_imports(ast.Module(body=[other], type_ignores=[]))
        elif isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        else:
            yield from runtime_imports(child)


def imported_modules(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]
) -> set[str]:
    """The package modules ``node`` imports (``from a import b`` imports ``a.b`` when that is
    a module, else ``a``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        prefix = base[: len(base) - (node.level - 1)]
        target = ".".join([*prefix, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    found = set()
    for alias in node.names:
        submodule = f"{target}.{alias.name}"
        found.add(submodule if submodule in known else target)
    return found & known


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: set[str] = set()
        for node in runtime_imports(tree):
            edges |= imported_modules(name, path.name == "__init__.py", node, known)
        graph[name] = edges - {name}
    return graph


def test_the_module_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        pytest.fail(f"import cycle: {' -> '.join(cycle)}")


def test_the_graph_sees_a_cycle_hidden_in_a_function() -> None:
    """The check can fail: a function-level import back to an importer is an edge."""
    source = "def f():\n    from spark_kafka_group.group import assignors\n    return assignors\n"
    tree = ast.parse(source)
    known = {"spark_kafka_group.group", "spark_kafka_group.group.assignors"}
    edges = set()
    for node in runtime_imports(tree):
        edges |= imported_modules("spark_kafka_group.group.x", False, node, known)
    assert edges == {"spark_kafka_group.group.assignors"}
    typed = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import spark_kafka_group.group\n"
    )
    assert [ast.unparse(n) for n in runtime_imports(ast.parse(typed))] == [
        "from typing import TYPE_CHECKING"
    ]
    cyclic = {"a": {"b"}, "b": {"a"}}
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(cyclic).static_order())


LOADED_AFTER = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.mark.parametrize(
    "module", ["spark_kafka_group.store.memory", "spark_kafka_group.group", "spark_kafka_group"]
)
def test_the_pure_parts_load_neither_delta_rs_nor_pyspark(module: str) -> None:
    """The simulation's in-memory store and the group core run without delta-rs and Spark (and
    ``import spark_kafka_group`` stays cheap)."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER, module], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert PACKAGE in loaded
    assert loaded.isdisjoint({"deltalake", "pyspark"}), loaded & {"deltalake", "pyspark"}
