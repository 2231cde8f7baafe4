"""The package's layout shows its architecture: the package root holds a few modules (the
rest live in the package of their part: ``group/``, ``member/``, ``ops/`` ...), and no module
is so long that a newcomer cannot read it at once."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spark_kafka_group"
MAX_ROOT_MODULES = 8
MAX_MODULE_LINES = 600


def test_the_package_root_holds_at_most_eight_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the package root: {root}"


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
